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
-- A fence kept only in Redis is lost with the key: a second loss in the same second as a fence
-- would fence to the same `since` and hand the same numbers out again under it. With an epoch
-- store (idgen.EpochStore, a database) the caller records every fence outside Redis before any
-- id is stamped with it, strictly above every fence recorded before: ARGV[5] = -1 asks this
-- script to report a possible loss without writing anything ({-2, the least fence}); the
-- caller records a fence F >= that and, holding it (no later fence can be recorded meanwhile),
-- calls again with ARGV[5] = F, which this script applies: since = max(since, F). F must still
-- lie ahead of Redis's clock by the fence, and the call must run before ARGV[6] (Unix ms, by
-- Redis's clock; the caller holds F until then): a call that a hung Redis runs late, when a later
-- fence may have been recorded and applied, changes nothing ({-3, the least fence}).
--
-- KEYS[1] id:<prefix>:<yyyymmdd>
-- ARGV[1] how many numbers to reserve (>= 0)
-- ARGV[2] Unix second at which the key expires
-- ARGV[3] a number known to be issued already (0: none)
-- ARGV[4] the fence: seconds added to Redis's clock for `since` after a possible loss
-- ARGV[5] 0: fence here (no epoch store); -1: report a possible loss; F > 0: apply fence F
-- ARGV[6] with ARGV[5] = F: the Unix ms after which the call changes nothing
--
-- Returns {last, since, fenced}: the reservation is [last - n + 1, last]; fenced is 1 when this
-- call found a possible loss (or applied a fence). {-1, 0, 0} when Redis's clock says the key
-- may have expired; {-2, least, now} when ARGV[5] = -1 and a fence is needed, at least `least`
-- (now: Redis's clock in Unix ms, to set ARGV[6] by); {-3, least, now} when the fence ARGV[5]
-- came too late (nothing written).
local time = redis.call('TIME')
local now = tonumber(time[1])
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
local last, since, fenced, legacy = 0, 0, false, false
if state.err then
  -- A counter of an earlier version (a plain string): keep its count, fence as after a loss.
  last = tonumber(redis.call('GET', key)) or 0
  fenced, legacy = true, true
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
local least = now + tonumber(ARGV[4])
local nowms = now * 1000 + math.floor(tonumber(time[2]) / 1000)
local durable = tonumber(ARGV[5])
if durable == -1 and fenced then
  return {-2, least, nowms}
elseif durable > 0 then
  if durable < least or nowms > tonumber(ARGV[6]) then
    return {-3, least, nowms}
  end
  since = math.max(since, durable)
  fenced = true
elseif fenced then
  since = math.max(since, least)
end
last = last + tonumber(ARGV[1])
if legacy then
  redis.call('DEL', key)
end
if fenced then
  redis.call('HSET', key, 'n', last, 'since', since, 'run', run)
else
  redis.call('HSET', key, 'n', last)
end
if redis.call('TTL', key) == -1 then
  redis.call('EXPIREAT', key, ARGV[2])
end
return {last, since, fenced and 1 or 0}
