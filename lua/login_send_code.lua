-- Stores a new login code for one phone unless its cooldown runs, and starts the next
-- cooldown. Cooldowns escalate with the sends of a streak, so an attacker cannot send code
-- after code to a phone, yet can never lock its owner out for longer than the cap: there is
-- no daily quota to exhaust. A streak ends once no code was sent for a whole window.
-- Atomic so that two concurrent sends cannot both pass the cooldown.
--
-- KEYS[1] <ns>:login:code:{<phone>}        hash {code, tries, deployment}
-- KEYS[2] <ns>:login:send:{<phone>}:gap    present while the cooldown runs
-- KEYS[3] <ns>:login:send:{<phone>}:streak sends of the current streak, TTL window (slides)
-- ARGV[1] code   ARGV[2] code TTL ms   ARGV[3] base cooldown ms   ARGV[4] cooldown cap ms
-- ARGV[5] sends of a streak at the base cooldown   ARGV[6] streak window ms
-- ARGV[7] the sending deployment (only it accepts the code)
--
-- Returns {1, cooldown ms} when stored, {-1, ms left} while the cooldown runs.
local gap = redis.call('PTTL', KEYS[2])
if gap > 0 then
  return {-1, gap}
end
local sent = redis.call('INCR', KEYS[3])
redis.call('PEXPIRE', KEYS[3], ARGV[6])
-- A new code replaces the old one and resets its wrong-try counter.
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'code', ARGV[1], 'tries', 0, 'deployment', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
-- base, base, base (the free sends), then doubling up to the cap.
local doublings = math.max(0, sent - tonumber(ARGV[5]))
local cooldown = tonumber(ARGV[3]) * 2 ^ math.min(doublings, 30)
cooldown = math.min(cooldown, tonumber(ARGV[4]))
redis.call('SET', KEYS[2], 1, 'PX', cooldown)
return {1, cooldown}
