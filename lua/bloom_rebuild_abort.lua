-- Abandons a rebuild (its source failed or its context ended): drops the half-built bitmap and
-- releases the lease, only if this rebuild still holds it. The live filter is untouched.
--
-- KEYS[1] bloom:{<name>}:rebuild        the bitmap being built
-- KEYS[2] bloom:{<name>}:rebuild:meta   hash {token, m, k}, the lease
-- ARGV[1] token
--
-- Returns 1 when dropped, 0 when the lease was already lost.
if redis.call('HGET', KEYS[2], 'token') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
