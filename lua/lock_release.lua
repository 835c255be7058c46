-- Releases a lock if the caller still owns it, and wakes the waiters; with a tombstone key,
-- cancels an acquisition whose reply the caller never saw.
-- Atomic compare-and-delete: a plain GET then DEL could delete a lock that expired in between
-- and was taken by someone else.
--
-- KEYS[1] lock key   KEYS[2] (to cancel) the acquisition's tombstone, same hash tag
-- ARGV[1] owner token   ARGV[2] release channel   ARGV[3] (to cancel) tombstone TTL ms
--
-- Returns 1 released, 0 not the owner (expired, deleted, taken over, or never taken).
-- redis.pcall: if the key is a reentrant lock's hash, GET fails with WRONGTYPE; pcall turns
-- that into an error table, which never equals the token, so the answer is "not the owner".
-- Cancelling: an acquisition may run after its caller gave up (a command left in a hung
-- Redis's input buffer runs when Redis resumes, in any order with this one). If it has not
-- taken the lock, the tombstone makes it fail (lock_obtain.lua) should it still arrive.
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
if KEYS[2] then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
end
return 0
