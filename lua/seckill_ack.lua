-- Settles persisted orders: acknowledges them in the group and deletes them from the stream,
-- so the stream only ever holds orders not yet in the database (its length is the backlog).
-- KEYS[1] orders stream   ARGV[1] group   ARGV[2..] entry ids
local ids = {}
for i = 2, #ARGV do
  ids[#ids + 1] = ARGV[i]
end
local n = redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
redis.call('XDEL', KEYS[1], unpack(ids))
return n
