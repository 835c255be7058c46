-- Stores a new login code for one phone, unless a send limit is hit.
-- Atomic so that two concurrent sends cannot both pass the limit checks.
--
-- KEYS[1] login:code:{<phone>}        hash {code, tries}
-- KEYS[2] login:send:{<phone>}:gap    present while the per-send cooldown runs
-- KEYS[3] login:send:{<phone>}:day    sends in the current 24 h window
-- ARGV[1] code   ARGV[2] code TTL ms   ARGV[3] cooldown ms
-- ARGV[4] max sends per window   ARGV[5] window ms
--
-- Returns {1, 0} when stored, {-1, ms left} in cooldown, {-2, ms left} when the window is full.
local gap = redis.call('PTTL', KEYS[2])
if gap > 0 then
  return {-1, gap}
end
local sent = tonumber(redis.call('GET', KEYS[3]) or '0')
if sent >= tonumber(ARGV[4]) then
  return {-2, redis.call('PTTL', KEYS[3])}
end
-- A new code replaces the old one and resets its wrong-try counter.
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'code', ARGV[1], 'tries', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], 1, 'PX', ARGV[3])
if redis.call('INCR', KEYS[3]) == 1 then
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
end
return {1, 0}
