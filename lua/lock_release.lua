-- Releases a lock if the caller still owns it, and wakes the waiters.
-- Atomic compare-and-delete: a plain GET then DEL could delete a lock that expired in between
-- and was taken by someone else.
--
-- KEYS[1] lock key   ARGV[1] owner token   ARGV[2] release channel
--
-- Returns 1 released, 0 not the owner (expired, deleted or taken over).
-- redis.pcall: if the key is a reentrant lock's hash, GET fails with WRONGTYPE; pcall turns
-- that into an error table, which never equals the token, so the answer is "not the owner".
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
return 0
