-- Retires a finished sale: once its end has passed (meta's end, by Redis's clock) and its
-- stream holds no order (none queued, none pending: persisted entries are deleted as they are
-- acknowledged), the sale's keys expire within ARGV[1] ms instead of the week WarmCommit gives
-- them. One script, so that the check and the expiry see the same state: an order queued in
-- between would otherwise lose its stream with the rest.
-- KEYS[1] meta   KEYS[2] stock   KEYS[3] buyers   KEYS[4] orders stream
-- ARGV[1] how long the keys are kept (ms)
-- Returns 1 retired (or already retiring), 0 not finished (on sale, or orders in the stream),
-- -1 no sale state (never warmed, expired, or lost).
local ends = redis.call('HGET', KEYS[1], 'end')
if not ends then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(ends) > now then
  return 0
end
if redis.call('TYPE', KEYS[4])['ok'] == 'stream' and redis.call('XLEN', KEYS[4]) > 0 then
  return 0
end
local ttl = tonumber(ARGV[1])
for i = 1, 4 do
  local left = redis.call('PTTL', KEYS[i])
  if left == -1 or left > ttl then
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
redis.call('HSET', KEYS[1], 'keep', now + ttl) -- keys a late script creates expire as soon
return 1
