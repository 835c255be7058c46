-- Gives back one hold of a reentrant lock; the last one deletes the lock and wakes the
-- waiters. With a tombstone key, cancels an acquisition whose reply the caller never saw.
-- Atomic so that the last hold going and the delete are one step (no window in which the
-- hash says "held by nobody" but still exists).
--
-- KEYS[1] lock key   KEYS[2] (to cancel) the acquisition's tombstone, same hash tag
-- ARGV[1] hold id   ARGV[2] release channel   ARGV[3] (to cancel) tombstone TTL ms
--
-- Returns the holds left (0: released), or -1 if the hold is not there. Cancelling: if the
-- acquisition has not run yet, the tombstone makes it fail should it still arrive (see
-- lock_release.lua).
if redis.pcall('HEXISTS', KEYS[1], ARGV[1]) ~= 1 then
  if KEYS[2] then
    redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
  end
  return -1
end
redis.call('HDEL', KEYS[1], ARGV[1])
local holds = redis.call('HLEN', KEYS[1]) - 2
if holds > 0 then
  return holds
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], '1')
return 0
