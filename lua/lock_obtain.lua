-- Takes a lock and draws its fencing token in one step.
-- Atomic so that only the caller that set the key draws a token, and tokens are drawn in the
-- order the lock changes hands: each holder's token is greater than every earlier holder's.
-- The counter never expires (a lock name costs one small key for good): an expiring counter
-- would restart at 1 and hand out tokens that guarded writes already saw.
--
-- KEYS[1] lock key   KEYS[2] fence counter   (same hash tag)
-- ARGV[1] owner token (random, one per acquisition)   ARGV[2] lease ms
--
-- Returns {1, fence} taken, or {0, pttl} held by someone else (pttl -1: held without expiry).
-- A reentrant lock of the same name (a hash) is "held by someone else" too: SET NX fails.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1])}
