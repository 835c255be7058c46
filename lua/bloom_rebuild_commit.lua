-- Ends a rebuild: the built bitmap replaces the live one and its m, k become the live meta, in
-- one atomic step, so a reader sees either the whole old filter or the whole new one.
-- RENAME is O(1) whatever the filter's size (the old bitmap is freed as one string).
--
-- KEYS[1] bloom:{<name>}                the live bitmap
-- KEYS[2] bloom:{<name>}:meta           hash {m, k}
-- KEYS[3] bloom:{<name>}:rebuild        the built bitmap
-- KEYS[4] bloom:{<name>}:rebuild:meta   hash {token, m, k}, the lease
-- ARGV[1] token
--
-- Returns 1 when swapped, 0 when the lease is lost (nothing changed).
local lease = redis.call('HMGET', KEYS[4], 'token', 'm', 'k')
if lease[1] ~= ARGV[1] or redis.call('EXISTS', KEYS[3]) == 0 then
  return 0
end
redis.call('RENAME', KEYS[3], KEYS[1])
redis.call('PERSIST', KEYS[1])
redis.call('DEL', KEYS[2], KEYS[4])
redis.call('HSET', KEYS[2], 'm', lease[2], 'k', lease[3])
return 1
