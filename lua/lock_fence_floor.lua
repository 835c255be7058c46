-- Raises a fence counter to at least a floor (Redlock). A Redlock fence is the greatest of the
-- tokens drawn on the nodes that granted the lock; writing it back to them while the lock is
-- held makes every later majority, which shares a node with this one, draw a greater one.
-- Atomic compare-and-set: two raises racing must leave the greater value.
--
-- KEYS[1] fence counter   ARGV[1] floor   ARGV[2] counter TTL ms (as draw_fence sets it)
--
-- Returns the counter after the raise.
local floor = tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < floor then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return floor
end
return current
