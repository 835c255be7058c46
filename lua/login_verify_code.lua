-- Checks a login code. A right code is deleted so it cannot be replayed; a wrong one counts a
-- try, and once the limit is reached the code stays locked (even the right code fails) until it
-- expires or a new one is sent. Atomic so parallel guesses cannot exceed the limit.
-- A code another deployment sent (two deployments under one namespace) is refused untouched:
-- neither used nor locked by a guess made at the wrong deployment.
--
-- KEYS[1] <ns>:login:code:{<phone>}   hash {code, tries, deployment}
-- ARGV[1] submitted code   ARGV[2] max wrong tries   ARGV[3] the checking deployment
--
-- Returns 1 ok, 0 wrong (tries left > 0), -1 no code (never sent or expired), -2 locked,
-- -3 another deployment's code.
local stored = redis.call('HGET', KEYS[1], 'code')
if not stored then
  return -1
end
if (redis.call('HGET', KEYS[1], 'deployment') or '') ~= ARGV[3] then
  return -3
end
local max = tonumber(ARGV[2])
if tonumber(redis.call('HGET', KEYS[1], 'tries')) >= max then
  return -2
end
if stored == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if redis.call('HINCRBY', KEYS[1], 'tries', 1) >= max then
  return -2
end
return 0
