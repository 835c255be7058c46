-- Takes a reentrant lock, or enters it once more if the caller's owner already holds it.
-- The lock is a hash {owner -> owner id, fence -> fencing token, <hold id> -> 1 per hold}
-- (hold ids are crypto/rand.Text, upper case, never 'owner' or 'fence'). A hold per acquisition, rather than
-- a count, lets a caller that never saw its reply remove exactly its own hold, or nothing.
-- Atomic so that "free or mine" and "take it or add a hold" are one step.
--
-- KEYS[1] lock key   KEYS[2] fence counter   KEYS[3] this acquisition's tombstone (same tag)
-- ARGV[1] owner id   ARGV[2] hold id   ARGV[3] lease ms   ARGV[4] fence counter TTL ms
--
-- Returns {1, fence, holds} taken (holds 1) or re-entered (holds > 1; the fence drawn at the
-- first acquisition), or {0, pttl, 0} held by another owner or by a simple lock of the name,
-- or {0, 0, 0} cancelled by its caller (see lock_reentrant_release.lua).
if redis.call('EXISTS', KEYS[3]) == 1 then
  return {0, 0, 0}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  local fence = draw_fence(KEYS[2], ARGV[4])
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', string.format('%.0f', fence), ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1, fence, 1}
end
-- pcall: a simple lock (a string) answers WRONGTYPE, which is "not mine".
if redis.pcall('HGET', KEYS[1], 'owner') == ARGV[1] then
  redis.call('HSET', KEYS[1], ARGV[2], 1)
  -- Never shortens: the owner's other holds count on the expiry they were given.
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
  return {1, tonumber(redis.call('HGET', KEYS[1], 'fence')), redis.call('HLEN', KEYS[1]) - 2}
end
return {0, redis.call('PTTL', KEYS[1]), 0}
