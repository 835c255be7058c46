-- Extends a reentrant lock's lease to at least a duration if the owner holds it (watchdog
-- renewal, Extend). Never shortens: the owner's holds in other processes count on the expiry
-- they were given, and a shorter one would let another owner in while they believe they hold
-- the lock.
--
-- KEYS[1] lock key   ARGV[1] owner id   ARGV[2] lease ms
--
-- Returns 1 the owner holds the lock (for at least ARGV[2] ms from now), 0 it does not.
if redis.pcall('HGET', KEYS[1], 'owner') == ARGV[1] then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return 1
end
return 0
