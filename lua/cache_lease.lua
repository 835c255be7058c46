-- Reads a cache entry, or takes the right to load it (a lease), in one round trip.
-- Atomic so that between "the value is missing" and "I hold the lease" nobody can fill the
-- value or take the lease: exactly one caller per key loads from the database.
--
-- KEYS[1] the value key   KEYS[2] its lease (mutex) key   (same hash tag)
-- ARGV[1] lease token (random, per load)   ARGV[2] lease ms
-- ARGV[3] '1' to return an existing value instead of leasing, '0' to lease regardless
--         (logical expiry: the stale value is there, a rebuild still needs the lease)
--
-- Returns {1, value} cached, {2, ''} lease taken, {3, pttl} someone else holds the lease.
if ARGV[3] == '1' then
  local v = redis.call('GET', KEYS[1])
  if v then
    return {1, v}
  end
end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {2, ''}
end
return {3, redis.call('PTTL', KEYS[2])}
