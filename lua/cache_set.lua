-- Sets a value directly (a write-through), or deletes it when ARGV[1] is empty, and in both
-- cases revokes any lease so that a loader which read the database earlier cannot overwrite
-- this newer state. Other processes drop their local copies on the event.
--
-- KEYS[1] value key   KEYS[2] lease key
-- ARGV[1] encoded value ('' = delete)   ARGV[2] TTL ms ('0' = no expiry)
-- ARGV[3] event channel   ARGV[4] event message
if ARGV[1] == '' then
  redis.call('DEL', KEYS[1])
elseif ARGV[2] == '0' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
