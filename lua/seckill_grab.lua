-- Admits buyers to a flash sale, or says why not, for one or more grabs of the same voucher
-- (the service sends concurrent grabs together: one call, one script run, many users).
-- Every check that can fail runs before the call's first write, so a call either applies all
-- its writes or none: Redis does not roll back a script that fails half-way, and a wrong-type
-- key would otherwise fail after stock was taken.
-- KEYS[1] meta hash (begin, end, on, keep: when the sale's keys expire, Unix ms)   KEYS[2] stock   KEYS[3] buyers hash user -> order
-- KEYS[4] orders stream
-- ARGV[1] now (Unix ms), then one pair per grab: ARGV[2i] user id, ARGV[2i+1] order id
-- Returns {code1, value1, code2, value2, ...}, one pair per grab in order: 0 admitted (value:
-- stock left), 1 not ready, 2 not started, 3 ended or off sale, 4 sold out, 5 already a buyer
-- (value: that order id).
local n = (#ARGV - 1) / 2
if n < 1 or n ~= math.floor(n) then
  return redis.error_reply('ERR seckill: want now and (user, order) pairs, got ' .. #ARGV .. ' arguments')
end
local out = {}
local function all(code)
  for i = 1, n do
    out[2 * i - 1] = code
    out[2 * i] = 0
  end
  return out
end

local meta = redis.call('HMGET', KEYS[1], 'begin', 'end', 'on', 'keep')
local stock = redis.call('GET', KEYS[2])
if not meta[1] or not stock then
  -- A missing key means the voucher was never warmed or Redis lost it: never "sold out".
  return all(1)
end
stock = tonumber(stock)
if not stock or stock ~= math.floor(stock) then
  -- DECRBY below would fail after the other writes.
  return redis.error_reply('ERR seckill: stock of ' .. KEYS[2] .. ' is not an integer')
end
local now = tonumber(ARGV[1])
if meta[3] ~= '1' or now >= tonumber(meta[2]) then
  return all(3)
end
if now < tonumber(meta[1]) then
  return all(2)
end
-- XADD comes after a buyer is recorded, so the stream's type is proven first; the buyers'
-- type is proven by the first HSETNX/HGET, which precedes every write, and the stock's by
-- tonumber above.
local t = redis.call('TYPE', KEYS[4])['ok']
if t ~= 'stream' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE seckill: ' .. KEYS[4] .. ' is a ' .. t .. ', not a stream')
end

local taken = 0
for i = 1, n do
  local user, order = ARGV[2 * i], ARGV[2 * i + 1]
  local code, value = 0, 0
  if stock - taken > 0 and redis.call('HSETNX', KEYS[3], user, order) == 1 then
    redis.call('XADD', KEYS[4], '*', 'o', order, 'u', user, 't', ARGV[1])
    taken = taken + 1
    value = stock - taken
  else
    local prev = redis.call('HGET', KEYS[3], user)
    if prev == order then
      -- This very grab already ran (a client retried after losing the reply): same answer.
      value = stock - taken
    elseif prev then
      code, value = 5, prev
    else
      code = 4
    end
  end
  out[2 * i - 1] = code
  out[2 * i] = value
end
if taken > 0 then
  redis.call('DECRBY', KEYS[2], taken)
  if meta[4] then -- the buyers and the stream may have been created just now: they expire with the sale
    redis.call('PEXPIREAT', KEYS[3], meta[4])
    redis.call('PEXPIREAT', KEYS[4], meta[4])
  end
end
return out
