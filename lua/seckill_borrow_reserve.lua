-- First step of a borrow (seckill/buckets.go): a user whose own stock bucket is sold out takes a
-- unit from another bucket. This step, in the user's own bucket, records the user as a buyer
-- before any unit moves, so one order per user holds (the user's buyer record lives only
-- here), and records an intent: the order waits for a donor until ARGV[4]. If the process dies
-- before the last step, recovery completes the intent (a donor lent the unit) or undoes it.
-- KEYS[1] meta   KEYS[2] buyers hash   KEYS[3] borrows hash (order -> user)
-- ARGV[1] now (Unix ms)   ARGV[2] user   ARGV[3] order   ARGV[4] not after (Unix ms)
-- Returns {code, value}: 0 reserved, 1 not ready, 2 not started, 3 ended or off sale, 5 already
-- a buyer (value: that order id), the codes of seckill_grab.lua.
local meta = redis.call('HMGET', KEYS[1], 'begin', 'end', 'on', 'keep')
if not meta[1] then
  return {1, 0}
end
local now = tonumber(ARGV[1])
if meta[3] ~= '1' or now >= tonumber(meta[2]) then
  return {3, 0}
end
if now < tonumber(meta[1]) then
  return {2, 0}
end
if redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3]) == 0 then
  return {5, redis.call('HGET', KEYS[2], ARGV[2])}
end
redis.call('HSET', KEYS[3], ARGV[3], ARGV[2] .. ':' .. ARGV[4])
if meta[4] then
  redis.call('PEXPIREAT', KEYS[2], meta[4])
  redis.call('PEXPIREAT', KEYS[3], meta[4])
end
return {0, 0}
