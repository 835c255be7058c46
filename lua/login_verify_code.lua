-- Checks a login code. A right code is deleted so it cannot be replayed; a wrong one counts a
-- try, and once the limit is reached the code stays locked (even the right code fails) until it
-- expires or a new one is sent. Atomic so parallel guesses cannot exceed the limit.
-- A code another deployment sent (two deployments under one namespace) is refused untouched:
-- neither used nor locked by a guess made at the wrong deployment.
--
-- Wrong tries are also counted per phone in a fixed window (24 h from the first). Once the
-- phone has used its allowance, each code allows one try until the window ends: a guesser then
-- gets one guess per code sent (and sends wait out the phone's cooldown), while the owner, who
-- has the code, still logs in with it. A hard stop would let anyone lock an owner out for a day.
--
-- KEYS[1] <ns>:login:code:{<phone>}    hash {code, tries, deployment}
-- KEYS[2] <ns>:login:guess:{<phone>}   wrong tries of the phone in the window, TTL the window
-- ARGV[1] submitted code   ARGV[2] max wrong tries per code   ARGV[3] the checking deployment
-- ARGV[4] wrong tries per phone per window at ARGV[2] per code   ARGV[5] window ms
--
-- Returns 1 ok, 0 wrong (tries left > 0), -1 no code (never sent or expired), -2 locked,
-- -3 another deployment's code, -4 locked, and the phone is over its allowance.
local stored = redis.call('HGET', KEYS[1], 'code')
if not stored then
  return -1
end
if (redis.call('HGET', KEYS[1], 'deployment') or '') ~= ARGV[3] then
  return -3
end
local allowance = tonumber(ARGV[4])
local capped = tonumber(redis.call('GET', KEYS[2]) or 0) >= allowance
local function locked()
  if capped then
    return -4
  end
  return -2
end
local max = tonumber(ARGV[2])
if capped then
  max = 1
end
if tonumber(redis.call('HGET', KEYS[1], 'tries')) >= max then
  return locked()
end
if stored == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
local tries = redis.call('HINCRBY', KEYS[1], 'tries', 1)
local wrong = redis.call('INCR', KEYS[2])
if wrong == 1 then
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
if wrong >= allowance then -- this try used the allowance up: the code gets no more either
  capped = true
  max = 1
end
if tries >= max then
  return locked()
end
return 0
