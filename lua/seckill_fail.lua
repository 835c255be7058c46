-- Gives up on one order entry: copies it to the dead-letter stream with the reason, takes it
-- out of the orders stream and compensates the admission (the buyer may try again; the unit
-- goes back on sale unless restore is 0). The entry's presence decides, not XACK (a rebuild
-- settles entries never delivered): whoever settles an entry deletes it in the same script, so
-- compensation runs once. When the order is known, the entry's order field must match it:
-- after a flush a new entry can get an old entry's id.
-- KEYS[1] orders stream   KEYS[2] dead-letter stream   KEYS[3] stock   KEYS[4] buyers
-- KEYS[5] lent hash (order -> user: units this bucket lent to other buckets' users)
-- ARGV[1] group   ARGV[2] entry id   ARGV[3] user ('' if unknown)   ARGV[4] order ('' if unknown)
-- ARGV[5] restore stock (1/0)   ARGV[6] reason   ARGV[7] deliveries   ARGV[8] dead-letter max length
-- Returns 1 if this call settled the entry, 0 if it was already settled. The dead-letter stream
-- takes the orders stream's TTL.
local e = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
if #e == 0 then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) -- a pending id whose entry is gone: nothing to settle
  return 0
end
if ARGV[4] ~= '' then
  local order = nil
  local f = e[1][2]
  for i = 1, #f, 2 do
    if f[i] == 'o' then order = f[i + 1] end
  end
  if order ~= ARGV[4] then
    return 0
  end
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[8], '*', 'entry', ARGV[2], 'o', ARGV[4], 'u', ARGV[3],
  'reason', ARGV[6], 'deliveries', ARGV[7])
-- Dead letters expire with the sale's other keys (the orders stream carries their expiry; the
-- FAILED rows stay in the database).
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
redis.call('XDEL', KEYS[1], ARGV[2])
local restore = false
if ARGV[3] ~= '' and redis.call('HGET', KEYS[4], ARGV[3]) == ARGV[4] then
  redis.call('HDEL', KEYS[4], ARGV[3])
  restore = true
end
-- A unit this bucket lent to a user of another stock bucket (seckill_borrow_take.lua): it comes
-- back here; the user's buyer record, in the user's own bucket, is released after.
if ARGV[4] ~= '' and redis.call('HDEL', KEYS[5], ARGV[4]) == 1 then
  restore = true
end
if restore and ARGV[5] == '1' and redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('INCR', KEYS[3])
end
return 1
