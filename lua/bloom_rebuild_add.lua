-- Sets one batch of a rebuild's bit positions in the bitmap being built and renews the lease.
-- The token check stops a rebuild whose lease expired (and maybe passed to another rebuild) from
-- writing on.
--
-- KEYS[1] bloom:{<name>}:rebuild        the bitmap being built
-- KEYS[2] bloom:{<name>}:rebuild:meta   hash {token, m, k}, the lease
-- ARGV[1] token   ARGV[2] lease ms   ARGV[3..] bit positions
--
-- Returns 1 when written, 0 when the lease is lost.
if redis.call('HGET', KEYS[2], 'token') ~= ARGV[1] or redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
for i = 3, #ARGV do
  redis.call('SETBIT', KEYS[1], ARGV[i], 1)
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
