-- Gives up on one order entry: copies it to the dead-letter stream with the reason, takes it
-- out of the orders stream and compensates the admission (the buyer may try again; the unit
-- goes back on sale unless restore is 0). XACK comes first and decides: if the entry was no
-- longer pending, another consumer settled it and nothing else happens, so compensation
-- runs once.
-- KEYS[1] orders stream   KEYS[2] dead-letter stream   KEYS[3] stock   KEYS[4] buyers
-- ARGV[1] group   ARGV[2] entry id   ARGV[3] user ('' if unknown)   ARGV[4] order ('' if unknown)
-- ARGV[5] restore stock (1/0)   ARGV[6] reason   ARGV[7] deliveries   ARGV[8] dead-letter max length
-- Returns 1 if this call settled the entry, 0 if it was already settled.
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return 0
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[8], '*', 'entry', ARGV[2], 'o', ARGV[4], 'u', ARGV[3],
  'reason', ARGV[6], 'deliveries', ARGV[7])
redis.call('XDEL', KEYS[1], ARGV[2])
if ARGV[3] ~= '' and redis.call('HGET', KEYS[4], ARGV[3]) == ARGV[4] then
  redis.call('HDEL', KEYS[4], ARGV[3])
  if ARGV[5] == '1' and redis.call('EXISTS', KEYS[3]) == 1 then
    redis.call('INCR', KEYS[3])
  end
end
return 1
