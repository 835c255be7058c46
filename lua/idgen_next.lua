-- Reserves the next n numbers of one day's id sequence (n = 1 in plain mode, the block size in
-- segment mode) and gives the day key its expiry, in one round trip.
--
-- The caller chose the day from its own clock; Redis's clock is only a guard. A day key is
-- dropped at ARGV[2] (the end of its UTC day plus the retention), and an INCRBY after that would
-- start the day's sequence again at 1 and repeat ids already issued. So the script refuses to
-- count once Redis's own clock (TIME, the clock that expires the key, read inside the same atomic
-- script) has reached ARGV[2]: a caller whose clock lags that far behind gets -1, never a reused
-- number.
--
-- The expiry is set only on a key that has none (a new key), so the steady state writes nothing
-- but the INCRBY; every caller of a prefix computes the same ARGV[2] for the same day.
--
-- KEYS[1] id:<prefix>:<yyyymmdd>
-- ARGV[1] how many numbers to reserve (>= 1)
-- ARGV[2] Unix second at which the key expires
--
-- Returns the last reserved number (the reservation is [last - n + 1, last]), or -1 when Redis's
-- clock says the key may already have expired.
local now = tonumber(redis.call('TIME')[1])
if now >= tonumber(ARGV[2]) then
  return -1
end
local last = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('TTL', KEYS[1]) == -1 then
  redis.call('EXPIREAT', KEYS[1], ARGV[2])
end
return last
