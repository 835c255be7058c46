-- Takes a reentrant lock, or enters it once more if the caller's owner already holds it.
-- The lock is a hash {owner -> hold count, '' -> fencing token} (owner ids are never empty).
-- Atomic so that "free or mine" and "take it or count one more hold" are one step.
--
-- KEYS[1] lock key   KEYS[2] fence counter   (same hash tag)
-- ARGV[1] owner id   ARGV[2] lease ms
--
-- Returns {1, fence, holds} taken (holds 1) or re-entered (holds > 1; the fence drawn at the
-- first acquisition), or {0, pttl, 0} held by another owner or by a simple lock of the name.
if redis.call('EXISTS', KEYS[1]) == 0 then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], ARGV[1], 1, '', fence)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, fence, 1}
end
-- pcall: a simple lock (a string) answers WRONGTYPE, which is "not mine".
if redis.pcall('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local holds = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  -- A nested acquisition never shortens the lease the outer one has.
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return {1, tonumber(redis.call('HGET', KEYS[1], '')), holds}
end
return {0, redis.call('PTTL', KEYS[1]), 0}
