-- Tells whether a voucher's sale state in Redis can be trusted: ready (meta and stock exist)
-- and current (meta's run field is this server's run_id, written by the last full rebuild).
-- Another run_id means Redis restarted or failed over since then, and may have come back with
-- an older state (a replica that lagged, an AOF that lost its tail): the state is rebuilt from
-- the database. A server whose INFO has no run_id (the embedded miniredis) is always current.
-- KEYS[1] meta   KEYS[2] stock
-- Returns {ready (1/0), current (1/0)}.
local info = redis.pcall('INFO', 'server')
local run = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or ''
local ready = redis.call('EXISTS', KEYS[1], KEYS[2]) == 2 and 1 or 0
local current = (redis.call('HGET', KEYS[1], 'run') or '') == run and 1 or 0
return {ready, current}
