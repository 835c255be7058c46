-- Tests many ids against a Bloom filter bitmap in one round trip. Read-only (run it with
-- EVALSHA_RO). The caller hashes each id to k bit positions (bloom.Locations modulo m), so the
-- script only reads bits and a Go bloom.BloomFilter with the same m and k agrees with it.
--
-- KEYS[1] bloom:{<name>}        the live bitmap, m bits
-- KEYS[2] bloom:{<name>}:meta   hash {m, k} the bitmap was built with
-- ARGV[1] m   ARGV[2] k   ARGV[3..] bit positions, k per id, grouped by id
--
-- Returns {1, a1, a2, ...} with one 1 (maybe present) or 0 (absent) per id; {0} when the filter
-- is not built (either key missing: never built, flushed or evicted); {-1, m, k} when the stored
-- filter was built with other parameters (the client's positions would mean nothing).
local meta = redis.call('HMGET', KEYS[2], 'm', 'k')
if not meta[1] or redis.call('EXISTS', KEYS[1]) == 0 then
  return {0}
end
if meta[1] ~= ARGV[1] or meta[2] ~= ARGV[2] then
  return {-1, meta[1], meta[2]}
end
local k = tonumber(ARGV[2])
local out = {1}
for i = 3, #ARGV, k do
  local hit = 1
  for j = i, i + k - 1 do
    -- One clear bit proves absence: skip the id's remaining positions.
    if redis.call('GETBIT', KEYS[1], ARGV[j]) == 0 then
      hit = 0
      break
    end
  end
  out[#out + 1] = hit
end
return out
