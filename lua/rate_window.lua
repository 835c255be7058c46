-- Counts one event in a fixed window and says whether it stays within the limit. Refused
-- events count too (a client that keeps trying stays refused), but the window never slides:
-- it ends PTTL after its first event.
--
-- KEYS[1] the counter (one key, so any slot)
-- ARGV[1] limit   ARGV[2] window ms
--
-- Returns {1, 0} within the limit, {0, ms until the window ends} over it.
local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if n > tonumber(ARGV[1]) then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then -- a counter left without expiry (written before this script): bound it now
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    ttl = tonumber(ARGV[2])
  end
  return {0, ttl}
end
return {1, 0}
