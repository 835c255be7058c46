-- Adds one batch of buyers (user -> order) during a rebuild, while admission is paused.
-- KEYS[1] buyers   ARGV: user, order, user, order, ...
for i = 1, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
return #ARGV / 2
