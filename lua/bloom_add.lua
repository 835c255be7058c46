-- Adds ids to a Bloom filter in one round trip: sets each id's k bit positions (computed by the
-- caller). While a Rebuild runs, the bits go into the bitmap being built as well, so an id added
-- after the rebuild's source was read is not lost when that bitmap replaces the live one.
--
-- It never creates the live filter: only a Rebuild does, from the source of truth. A filter that
-- Redis lost (restart, flush, eviction) and that Add brought back holding just the new ids would
-- answer "absent" for every older id.
--
-- KEYS[1] bloom:{<name>}                the live bitmap
-- KEYS[2] bloom:{<name>}:meta           hash {m, k}
-- KEYS[3] bloom:{<name>}:rebuild        the bitmap a Rebuild is building
-- KEYS[4] bloom:{<name>}:rebuild:meta   hash {token, m, k}, the rebuild's lease (expires)
-- ARGV[1] m   ARGV[2] k   ARGV[3..] bit positions
--
-- While a rebuild runs, its parameters must match (the ids must reach the filter that will be
-- live); the live bitmap is written too if its parameters match, and skipped if the rebuild is
-- changing them. Without a rebuild, the live filter must exist and match.
-- Returns {1} when added; {0} when there is nothing to add to (not built, no rebuild running);
-- {-1, m, k} / {-2, m, k} when the live / rebuilding filter has other parameters (nothing written).
local live = redis.call('HMGET', KEYS[2], 'm', 'k')
local nxt = redis.call('HMGET', KEYS[4], 'm', 'k')
local hasLive = live[1] and redis.call('EXISTS', KEYS[1]) == 1
local hasNext = nxt[1] and redis.call('EXISTS', KEYS[3]) == 1
local liveOK = hasLive and live[1] == ARGV[1] and live[2] == ARGV[2]
if hasNext then
  if nxt[1] ~= ARGV[1] or nxt[2] ~= ARGV[2] then
    return {-2, nxt[1], nxt[2]}
  end
elseif not hasLive then
  return {0}
elseif not liveOK then
  return {-1, live[1], live[2]}
end
for i = 3, #ARGV do
  if liveOK then
    redis.call('SETBIT', KEYS[1], ARGV[i], 1)
  end
  if hasNext then
    redis.call('SETBIT', KEYS[3], ARGV[i], 1)
  end
end
return {1}
