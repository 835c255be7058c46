-- Writes a loaded value back, only if the writer still holds the lease it took before reading
-- the database. A delete (or Set) after that read removed the lease, so a loader that read
-- old data cannot put it back: this is the stale-set protection. On success the lease is
-- dropped and waiters in every process are woken through the cache's channel.
--
-- KEYS[1] value key   KEYS[2] lease key
-- ARGV[1] lease token   ARGV[2] encoded value   ARGV[3] TTL ms ('0' = no expiry)
-- ARGV[4] event channel   ARGV[5] event message
--
-- Returns 1 written, 0 refused (lease lost).
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
if ARGV[3] == '0' then
  redis.call('SET', KEYS[1], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
