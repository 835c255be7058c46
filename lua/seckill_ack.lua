-- Settles persisted orders: acknowledges them in the group and removes them from the stream,
-- so the stream only ever holds orders not yet in the database (its length is the backlog).
-- KEYS[1] orders stream   ARGV[1] group   ARGV[2..] entry ids
--
-- Removing entries one by one (XDEL) costs Redis several times what reading and acknowledging
-- them does, and leaves holes that later reads skip. A group delivers entries in id order, so
-- every entry below both the group's oldest pending entry and its last delivered one has been
-- delivered and acknowledged: that prefix goes in one cut (XTRIM MINID). The cut never passes
-- the largest id given, and ids at or above it (another consumer's older batch is still
-- pending, or the entry was never delivered) are deleted one by one as before. The stream must
-- have only this group (one per voucher stream here).
local ids = {}
for i = 2, #ARGV do
  ids[#ids + 1] = ARGV[i]
end
if #ids == 0 then
  return 0
end
local n = redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))

-- Stream ids as {ms, seq}; ms fits a Lua number exactly (< 2^53), so does seq here.
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return {tonumber(ms), tonumber(seq)}
end
local function less(a, b)
  return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2])
end

local cut = nil -- entries below it are removed by the trim
for _, id in ipairs(ids) do
  local p = parse(id)
  if p[1] then
    local upto = {p[1], p[2] + 1}
    if not cut or less(cut, upto) then
      cut = upto
    end
  end
end
if cut then
  local delivered = nil
  local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
  for _, g in ipairs(groups) do
    local f = {}
    for i = 1, #g, 2 do
      f[g[i]] = g[i + 1]
    end
    if f['name'] == ARGV[1] then
      delivered = parse(f['last-delivered-id'])
    end
  end
  if not delivered or not delivered[1] then
    cut = nil
  else
    local after = {delivered[1], delivered[2] + 1}
    if less(after, cut) then
      cut = after
    end
    local pending = redis.call('XPENDING', KEYS[1], ARGV[1])
    if pending[1] > 0 then
      local oldest = parse(pending[2])
      if less(oldest, cut) then
        cut = oldest
      end
    end
  end
end

local rest = {}
if cut then
  redis.call('XTRIM', KEYS[1], 'MINID', cut[1] .. '-' .. cut[2])
  for _, id in ipairs(ids) do
    local p = parse(id)
    if not p[1] or not less(p, cut) then
      rest[#rest + 1] = id
    end
  end
else
  rest = ids
end
if #rest > 0 then
  redis.call('XDEL', KEYS[1], unpack(rest))
end
return n
