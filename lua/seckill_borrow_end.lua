-- Last step of a borrow, in the user's own bucket: the intent goes, and if no donor lent a unit
-- the reservation goes too (the user may grab again). Run by the borrower, or by recovery for
-- an intent past its deadline.
-- KEYS[1] buyers hash   KEYS[2] borrows hash
-- ARGV[1] user   ARGV[2] order   ARGV[3] taken (1/0)
-- Returns 1 if the intent was still there, 0 if it had been settled already.
local had = redis.call('HDEL', KEYS[2], ARGV[2])
if ARGV[3] == '0' and redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return had
