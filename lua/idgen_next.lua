-- Reserves the next n numbers of one day's id sequence (n = 1 in plain mode, the block size in
-- segment mode; 0 only raises the counter to a floor) and says from which second on the ids
-- made with them may be stamped, in one round trip.
--
-- The day key is a hash: n (the last number reserved), since (a Unix second: ids using numbers
-- of this counter carry this second or a later one) and run (the run_id of the Redis process
-- that last counted on it).
--
-- Why `since`: a Redis that loses the counter (FLUSHALL, a restart without persistence) or
-- comes back with an older one (a failover to a replica that lagged, an AOF that lost its tail)
-- would hand out numbers again. Ids are (second, number), so reissued numbers are harmless if
-- every id made with them carries a later second than every id made before the loss. An id is
-- stamped no later than its generator's clock allows (ids from a segment block at most the
-- block's lifetime after the block was reserved, clocks at most the skew apart), so after a
-- possible loss the counter is fenced: since = now + ARGV[4], that lifetime plus the skew.
-- A possible loss is: no key (a new day also looks like this: its first ids wait for nothing,
-- they are stamped a few seconds ahead), another Redis process than the one that counted last
-- (restart, failover: INFO's run_id), or a counter below a number a caller knows was issued
-- (ARGV[3], the generator's own high-water mark, or a database's largest id).
--
-- The caller chose the day from its own clock; Redis's clock guards the key's life: a day key
-- expires at ARGV[2] (the end of its UTC day plus the retention), and counting after that would
-- start the day again at 1. So the script refuses once Redis's clock has reached ARGV[2].
--
-- KEYS[1] id:<prefix>:<yyyymmdd>
-- ARGV[1] how many numbers to reserve (>= 0)
-- ARGV[2] Unix second at which the key expires
-- ARGV[3] a number known to be issued already (0: none)
-- ARGV[4] the fence: seconds added to Redis's clock for `since` after a possible loss
--
-- Returns {last, since, fenced}: the reservation is [last - n + 1, last]; fenced is 1 when this
-- call found a possible loss. {-1, 0, 0} when Redis's clock says the key may have expired.
local now = tonumber(redis.call('TIME')[1])
if now >= tonumber(ARGV[2]) then
  return {-1, 0, 0}
end
local run = ''
local ok, info = pcall(redis.call, 'INFO', 'server')
if ok and type(info) == 'string' then
  run = string.match(info, 'run_id:(%x+)') or ''
end

local key = KEYS[1]
local state = redis.pcall('HMGET', key, 'n', 'since', 'run')
local last, since, fenced = 0, 0, false
if state.err then
  -- A counter of an earlier version (a plain string): keep its count, fence as after a loss.
  last = tonumber(redis.call('GET', key)) or 0
  redis.call('DEL', key)
  fenced = true
elseif not state[1] then
  fenced = true
else
  last = tonumber(state[1])
  since = tonumber(state[2]) or 0
  if state[3] ~= run then
    fenced = true
  end
end
local floor = tonumber(ARGV[3])
if last < floor then
  last = floor
  fenced = true
end
last = last + tonumber(ARGV[1])
if fenced then
  since = math.max(since, now + tonumber(ARGV[4]))
  redis.call('HSET', key, 'n', last, 'since', since, 'run', run)
else
  redis.call('HSET', key, 'n', last)
end
if redis.call('TTL', key) == -1 then
  redis.call('EXPIREAT', key, ARGV[2])
end
return {last, since, fenced and 1 or 0}
