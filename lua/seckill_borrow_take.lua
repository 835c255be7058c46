-- Second step of a borrow, in a donor bucket: takes one unit for an order reserved in another
-- bucket and queues the order here, in the same script, so the unit is at every moment either
-- in a bucket's stock or in a bucket's stream (a rebuild's count stays exact). The lent hash
-- records the order: recovery reads it to tell a completed borrow from one to undo. Past
-- ARGV[4] (Redis's clock) it takes nothing: recovery may have undone the reservation then.
-- KEYS[1] meta   KEYS[2] stock   KEYS[3] orders stream   KEYS[4] lent hash (order -> user)
-- ARGV[1] now (Unix ms)   ARGV[2] user   ARGV[3] order   ARGV[4] not after (Unix ms)
-- Returns {code, stock left}: 0 taken (or taken before for this order), 1 not ready, 3 ended or
-- off sale, 4 no unit here, 6 too late.
local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(ARGV[4]) then
  return {6, 0}
end
local meta = redis.call('HMGET', KEYS[1], 'begin', 'end', 'on', 'keep')
local stock = tonumber(redis.call('GET', KEYS[2]))
if not meta[1] or not stock then
  return {1, 0}
end
if meta[3] ~= '1' or tonumber(ARGV[1]) >= tonumber(meta[2]) then
  return {3, 0}
end
if redis.call('HEXISTS', KEYS[4], ARGV[3]) == 1 then
  return {0, stock}
end
if stock < 1 then
  return {4, 0}
end
redis.call('XADD', KEYS[3], '*', 'o', ARGV[3], 'u', ARGV[2], 't', ARGV[1])
redis.call('HSET', KEYS[4], ARGV[3], ARGV[2])
redis.call('DECR', KEYS[2])
if meta[4] then
  redis.call('PEXPIREAT', KEYS[3], meta[4])
  redis.call('PEXPIREAT', KEYS[4], meta[4])
end
return {0, stock - 1}
