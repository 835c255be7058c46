-- Takes a lock and draws its fencing token in one step.
-- Atomic so that only the caller that set the key draws a token, and tokens are drawn in the
-- order the lock changes hands: each holder's token is greater than every earlier holder's
-- (draw_fence, lock_fence.lua).
--
-- KEYS[1] lock key   KEYS[2] fence counter   KEYS[3] this acquisition's tombstone (same hash tag)
-- ARGV[1] owner token (random, one per acquisition)   ARGV[2] lease ms   ARGV[3] counter TTL ms
--
-- Returns {1, fence} taken, or {0, pttl} held by someone else (pttl -1: held without expiry).
-- A reentrant lock of the same name (a hash) is "held by someone else" too: SET NX fails.
-- A tombstone means the caller gave up on this acquisition and cancelled it before it got
-- here (lock_release.lua): it must not take the lock; the reply {0, 0} goes to nobody.
if redis.call('EXISTS', KEYS[3]) == 1 then
  return {0, 0}
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, draw_fence(KEYS[2], ARGV[3])}
end
return {0, redis.call('PTTL', KEYS[1])}
