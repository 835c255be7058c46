-- Reads a cache entry, or takes the right to load it (a lease), in one round trip.
-- Atomic so that between "the value is missing" and "I hold the lease" nobody can fill the
-- value or take the lease: exactly one caller per key loads from the database.
--
-- KEYS[1] the value key   KEYS[2] its lease (mutex) key   (same hash tag)
-- ARGV[1] lease token (random, per load)   ARGV[2] lease ms
-- ARGV[3] '1' to return an existing value instead of leasing;
--         '2' to lease only if the value is missing or still the logically expired one the
--         caller saw: its 8-byte expire-at (bytes 2-9 of the entry) equals ARGV[4]. Another
--         process's rebuild that landed meanwhile is returned instead, so a rebuild queued in
--         several processes loads once per expiry window.
-- ARGV[4] with '2': the expire-at bytes of the stale entry
--
-- Returns {1, value} cached, {2, ''} lease taken, {3, pttl} someone else holds the lease.
if ARGV[3] == '1' then
  local v = redis.call('GET', KEYS[1])
  if v then
    return {1, v}
  end
elseif ARGV[3] == '2' then
  local v = redis.call('GET', KEYS[1])
  if v and string.sub(v, 2, 9) ~= ARGV[4] then
    return {1, v}
  end
end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {2, ''}
end
return {3, redis.call('PTTL', KEYS[2])}
