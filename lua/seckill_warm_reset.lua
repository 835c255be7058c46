-- Starts a full rebuild of a voucher's admission state: the meta hash goes first, so admission
-- answers "not ready" until seckill_warm_commit.lua puts it back, and the buyers are cleared
-- to be refilled from the database.
-- KEYS[1] meta   KEYS[2] buyers
redis.call('DEL', KEYS[1], KEYS[2])
return 1
