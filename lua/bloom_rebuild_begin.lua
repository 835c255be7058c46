-- Starts a Bloom filter rebuild: takes the rebuild lease and creates an empty bitmap of m bits
-- next to the live one. Readers keep using the live bitmap until bloom_rebuild_commit swaps the
-- new one in. The lease expires, so a crashed rebuild does not block the next one forever.
--
-- KEYS[1] bloom:{<name>}:rebuild        the bitmap to build
-- KEYS[2] bloom:{<name>}:rebuild:meta   hash {token, m, k}, the lease
-- ARGV[1] token (random, identifies this rebuild)   ARGV[2] m   ARGV[3] k   ARGV[4] lease ms
--
-- Returns 1 when started, 0 when another rebuild holds the lease.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], 'token', ARGV[1], 'm', ARGV[2], 'k', ARGV[3])
-- Allocate all m bits now: the key exists even if no id comes, and it has its final size.
redis.call('SETBIT', KEYS[1], tonumber(ARGV[2]) - 1, 0)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
