-- Drops a cache entry its reader could not decode (written by another version of the code,
-- or foreign bytes), only if it still holds those bytes: a value written meanwhile stays, and
-- so does any lease (a running load still writes back). Atomic so that the check and the
-- delete see the same value.
--
-- KEYS[1] value key   ARGV[1] the undecodable bytes
-- Returns 1 dropped, 0 the key holds something else (or nothing).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
