-- Moves units into or out of one stock bucket (seckill/recovery_buckets.go): a warm that found
-- a voucher's buckets holding more or fewer units than the database's stock adds the
-- difference, or takes it from the buckets that still have stock. Only the stock changes, so
-- the units each bucket is selling meanwhile stay its own.
-- Past ARGV[2] (Redis's clock, Unix ms) it changes nothing: the caller's database read is
-- trusted only while it holds the voucher's row lock (see seckill_warm_commit.lua).
-- KEYS[1] stock   ARGV[1] units (> 0 adds, < 0 takes)   ARGV[2] not after (Unix ms)
-- Returns {1, units moved}: all of an addition (none if the bucket has no stock: it is not
-- ready, and only a rebuild makes it so), a take up to the stock there is; or {0, 0} past
-- ARGV[2].
local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(ARGV[2]) then
  return {0, 0}
end
local s = tonumber(redis.call('GET', KEYS[1]))
local n = tonumber(ARGV[1])
if not s then
  return {1, 0}
end
if n < 0 then
  n = -math.min(math.max(s, 0), -n)
end
if n ~= 0 then
  redis.call('INCRBY', KEYS[1], n)
end
return {1, n}
