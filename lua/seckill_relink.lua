-- Settles an admitted order that stands in the database under another order's id, which only
-- happens after Redis lost state: re-homed under a fresh id (its own id had been issued before
-- and is another order's), or superseded by the user's existing order of the voucher. The
-- buyer then names the order that stands for it, so ALREADY_PURCHASED names the user's own
-- order; a superseded order's unit goes back on sale (a re-homed order keeps its unit).
-- The entry's presence decides, not XACK (a rebuild settles entries never delivered): whoever
-- settles an entry deletes it in the same script, so the compensation runs once. The order
-- field is compared too: after a flush a new entry can get an old entry's id.
-- KEYS[1] orders stream   KEYS[2] stock   KEYS[3] buyers
-- ARGV[1] group   ARGV[2] entry id   ARGV[3] user   ARGV[4] order admitted   ARGV[5] order standing for it
-- ARGV[6] put the unit back (1/0)
-- Returns 1 if this call settled the entry, 0 if it was settled already.
local e = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
local order = nil
if #e == 1 then
  local f = e[1][2]
  for i = 1, #f, 2 do
    if f[i] == 'o' then order = f[i + 1] end
  end
end
if #e == 0 then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) -- a pending id whose entry is gone: nothing to settle
  return 0
end
if order ~= ARGV[4] then
  return 0
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
if redis.call('HGET', KEYS[3], ARGV[3]) == ARGV[4] then
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
  if ARGV[6] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('INCR', KEYS[2])
  end
end
return 1
