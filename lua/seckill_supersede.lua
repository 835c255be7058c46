-- Settles an admitted order the database refused because the user already holds another
-- order of the voucher there (possible only after Redis lost state): the buyer entry points at
-- the order that exists and the unit the duplicate took goes back on sale.
-- KEYS[1] orders stream   KEYS[2] stock   KEYS[3] buyers
-- ARGV[1] group   ARGV[2] entry id   ARGV[3] user   ARGV[4] duplicate order   ARGV[5] existing order
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return 0
end
redis.call('XDEL', KEYS[1], ARGV[2])
if redis.call('HGET', KEYS[3], ARGV[3]) == ARGV[4] then
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('INCR', KEYS[2])
  end
end
return 1
