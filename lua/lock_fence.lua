-- Fencing tokens as a hybrid logical clock: the part of every script that draws one (lua.go
-- puts this file before the script's own text).
--
-- A token is max(counter + 1, Redis TIME in microseconds), written back to the counter with a
-- TTL. Tokens thus track the time they were drawn at: a counter that Redis lost (FLUSHALL, a
-- restart without persistence, its TTL) or rolled back (a failover to a lagging replica, an
-- AOF that lost its tail) still yields tokens above every earlier one, provided Redis's clock
-- is not behind the moment the last earlier token was drawn. The counter covers bursts
-- within one microsecond and a clock that steps back while it lives, which is why it
-- outlives the lock by a margin. Tokens stay below 2^53 (until the year 2255): exact in Lua's
-- doubles and in JavaScript.
local function draw_fence(counter, ttl_ms)
  local now = redis.call('TIME')
  local fence = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local last = tonumber(redis.call('GET', counter) or '0')
  if last >= fence then
    fence = last + 1
  end
  redis.call('SET', counter, string.format('%.0f', fence), 'PX', ttl_ms)
  return fence
end

