-- Gives back one hold of a reentrant lock; the last one deletes the lock and wakes the waiters.
-- Atomic so that a count reaching zero and the delete are one step (no window in which the
-- hash says "held by nobody" but still exists).
--
-- KEYS[1] lock key   ARGV[1] owner id   ARGV[2] release channel
--
-- Returns the owner's holds left (0: released), or -1 if the owner holds nothing.
if redis.pcall('HEXISTS', KEYS[1], ARGV[1]) ~= 1 then
  return -1
end
local holds = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if holds > 0 then
  return holds
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], '1')
return 0
