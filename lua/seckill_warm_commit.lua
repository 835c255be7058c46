-- Sets a voucher's sale window and stock and makes it ready. The stock is the database stock
-- minus the orders still in the stream (admitted, not yet written), computed here so that no
-- admission slips between reading the stream's length and setting the stock. With
-- rebuild = 1 the stream's buyers are added back too (the database cannot know them), and the
-- meta records the server's run_id (see seckill_state.lua): the state is current for it, and
-- when (rebuilt, Unix ms): orders told before it may have been lost with the state it replaced.
-- The caller holds the voucher's lock, so the consumer commits nothing meanwhile.
--
-- ARGV[6] bounds when the commit may still run (Redis's clock, Unix ms): the caller holds the
-- voucher's row lock until then (plus a margin for clocks). A call the caller gave up on (a
-- hung Redis) that runs later, once the lock is gone and the consumer has written batches,
-- would set a stock from a stale database read; past ARGV[6] it changes nothing.
-- KEYS[1] meta   KEYS[2] stock   KEYS[3] buyers   KEYS[4] orders stream
-- ARGV[1] begin (Unix ms)   ARGV[2] end   ARGV[3] on (1/0)   ARGV[4] database stock
-- ARGV[5] rebuild (1/0)   ARGV[6] not after (Unix ms)   ARGV[7] retention (ms)   ARGV[8] mode
-- The four keys expire ARGV[7] after the sale's end (or after now, for a sale already over):
-- buyers and orders grow with the sale, and nothing of a sale is needed long after it (the
-- database holds the orders). meta's "keep" tells the grab script when, for the keys it creates.
-- ARGV[8] is the mode: 'set' sets the stock as above, whatever Redis holds (a new sale, a
-- rebuild); 'update' too, but only on a sale that is ready; 'keep' (a warm of stock buckets
-- that are all ready, seckill/recovery_buckets.go) leaves the stock as it is, on a sale that is
-- ready. A sale not ready (its meta or stock lost since the caller looked) is left alone by
-- 'update' and 'keep': only a rebuild may bring it back, with its buyers.
-- Returns {stock set (or kept), orders queued in the stream}, or {-1, 0} (nothing written) past
-- ARGV[6], or {-2, 0} (nothing written) with 'update' or 'keep' on a sale not ready.
local now = redis.call('TIME')
local nowms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if nowms > tonumber(ARGV[6]) then
  return {-1, 0}
end
local keep = ARGV[8] == 'keep'
local kept
if ARGV[8] ~= 'set' then
  kept = tonumber(redis.call('GET', KEYS[2]))
  if not kept or redis.call('EXISTS', KEYS[1]) == 0 then
    return {-2, 0}
  end
end
local t = redis.call('TYPE', KEYS[4])['ok']
if t ~= 'stream' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE seckill: ' .. KEYS[4] .. ' is a ' .. t .. ', not a stream')
end
local queued = 0
if t == 'stream' then
  queued = redis.call('XLEN', KEYS[4])
  if ARGV[5] == '1' and queued > 0 then
    local entries = redis.call('XRANGE', KEYS[4], '-', '+')
    for _, e in ipairs(entries) do
      local f = e[2]
      local user, order
      for i = 1, #f, 2 do
        if f[i] == 'u' then user = f[i + 1] elseif f[i] == 'o' then order = f[i + 1] end
      end
      if user and order then
        redis.call('HSET', KEYS[3], user, order)
      end
    end
  end
end
local stock = kept
if not keep then
  stock = tonumber(ARGV[4]) - queued
  if stock < 0 then
    stock = 0
  end
  redis.call('SET', KEYS[2], stock)
end
redis.call('HSET', KEYS[1], 'begin', ARGV[1], 'end', ARGV[2], 'on', ARGV[3])
if ARGV[5] == '1' then
  local info = redis.pcall('INFO', 'server')
  local run = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or ''
  redis.call('HSET', KEYS[1], 'run', run, 'rebuilt', nowms)
end
local expires = math.max(tonumber(ARGV[2]), nowms) + tonumber(ARGV[7])
redis.call('HSET', KEYS[1], 'keep', expires)
for i = 1, 4 do
  redis.call('PEXPIREAT', KEYS[i], expires)
end
return {stock, queued}
