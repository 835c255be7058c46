-- Admits one buyer to a flash sale, or says why not. Every check runs before the first write,
-- so the script either applies all three writes or none: Redis does not roll back a script
-- that fails half-way, and a wrong-type key would otherwise fail after stock was taken.
-- KEYS[1] meta hash (begin, end, on)   KEYS[2] stock   KEYS[3] buyers hash user -> order
-- KEYS[4] orders stream
-- ARGV[1] user id   ARGV[2] order id   ARGV[3] now (Unix ms)
-- Returns {code, value}: 0 admitted (value: stock left), 1 not ready, 2 not started,
-- 3 ended or off sale, 4 sold out, 5 already a buyer (value: that order id).
local meta = redis.call('HMGET', KEYS[1], 'begin', 'end', 'on')
local stock = redis.call('GET', KEYS[2])
if not meta[1] or not stock then
  -- A missing key means the voucher was never warmed or Redis lost it: never "sold out".
  return {1, 0}
end
stock = tonumber(stock)
if not stock or stock ~= math.floor(stock) then
  -- DECR below would fail after the other writes.
  return redis.error_reply('ERR seckill: stock of ' .. KEYS[2] .. ' is not an integer')
end
local now = tonumber(ARGV[3])
if meta[3] ~= '1' or now >= tonumber(meta[2]) then
  return {3, 0}
end
if now < tonumber(meta[1]) then
  return {2, 0}
end
local prev = redis.call('HGET', KEYS[3], ARGV[1])
if prev == ARGV[2] then
  -- This very call already ran (a client retried after losing the reply): same answer.
  return {0, tonumber(stock)}
end
if prev then
  return {5, prev}
end
if stock <= 0 then
  return {4, 0}
end
-- XADD is the first write because it is the one that can still fail (a wrong-type key);
-- the buyers' type was proven by HGET and the stock's by tonumber above.
redis.call('XADD', KEYS[4], '*', 'o', ARGV[2], 'u', ARGV[1], 't', ARGV[3])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
return {0, redis.call('DECR', KEYS[2])}
