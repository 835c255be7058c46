-- Takes up to ARGV[1] units from one stock bucket (a warm moving stock between buckets: the
-- bucket's share of the database stock was smaller than what it had queued meanwhile).
-- KEYS[1] stock   ARGV[1] units wanted
-- Returns the units taken.
local s = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local n = math.min(s, tonumber(ARGV[1]))
if n > 0 then
  redis.call('DECRBY', KEYS[1], n)
else
  n = 0
end
return n
