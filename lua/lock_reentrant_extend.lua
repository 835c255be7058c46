-- Sets a reentrant lock's remaining lease if the owner holds it (watchdog renewal, Extend).
--
-- KEYS[1] lock key   ARGV[1] owner id   ARGV[2] lease ms
--
-- Returns 1 extended, 0 the owner holds nothing.
if redis.pcall('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
