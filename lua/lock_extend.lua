-- Sets a lock's remaining lease if the caller still owns it (the watchdog's renewal, Extend).
-- Atomic compare-and-pexpire, for the same reason as lock_release.lua.
--
-- KEYS[1] lock key   ARGV[1] owner token   ARGV[2] lease ms
--
-- Returns 1 extended, 0 not the owner (expired, deleted or taken over).
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
