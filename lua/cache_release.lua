-- Gives a lease back without writing (the load failed), only if the caller still owns it,
-- and wakes waiters so one of them retries at once instead of waiting out the lease.
--
-- KEYS[1] lease key   ARGV[1] lease token   ARGV[2] event channel   ARGV[3] event message
-- Returns 1 released, 0 not the owner (expired or taken over).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
