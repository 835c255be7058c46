-- Tells whether a voucher's sale state in Redis can be trusted: ready (meta and stock exist)
-- and current (meta's run field is this server's run_id, written by the last full rebuild).
-- Another run_id means Redis restarted or failed over since then, and may have come back with
-- an older state (a replica that lagged, an AOF that lost its tail): the state is rebuilt from
-- the database. A server whose INFO has no run_id (the embedded miniredis) is always current.
-- It also says when the last full rebuild ran (meta's rebuilt, Redis's clock in Unix ms; 0 if
-- none recorded) and when the oldest order still in the stream was added (its entry id's ms; 0
-- if the stream is empty): the orders told before a rebuild may have been lost with the state
-- it replaced, and the orders added before the oldest one left are written.
-- KEYS[1] meta   KEYS[2] stock   KEYS[3] orders stream
-- Returns {ready (1/0), current (1/0), rebuilt, oldest}.
local info = redis.pcall('INFO', 'server')
local run = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or ''
local ready = redis.call('EXISTS', KEYS[1], KEYS[2]) == 2 and 1 or 0
local meta = redis.call('HMGET', KEYS[1], 'run', 'rebuilt')
local current = (meta[1] or '') == run and 1 or 0
local rebuilt = tonumber(meta[2]) or 0
local oldest = 0
if redis.call('TYPE', KEYS[3])['ok'] == 'stream' then
  local first = redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', 1)[1]
  if first then
    oldest = tonumber(string.match(first[1], '^(%d+)')) or 0
  end
end
return {ready, current, rebuilt, oldest}
