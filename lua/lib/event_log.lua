-- event_log(events, done, meta): this call's log of job transitions, to hand to
-- log_event() and, once, to flush_events(). events is the queue's event STREAM
-- ('leaseq:{<queue>}:events'), done its done STREAM (signal_done); meta is read
-- once (HMGET) for the per-queue switch: field 'events' = 'off' records nothing,
-- field 'events_maxlen' = the approximate bound in entries (default 10000).
-- The bound is read strictly (decimal digits, 1 .. 100000000, as set_events
-- writes it): anything an operator put there by hand ('1.5', '1e20', 'nan', ' 7')
-- is the default, never an XADD argument that would fail the call after its
-- other writes.
-- Returns the table { key, done, off, maxlen, fields, lists, by, n, clock } (by: the
-- lists by from-state then to-state, so that noting a transition builds no field
-- name; clock: meta's clock floor as read in the same HMGET, false if unset, for
-- now_ms(meta, peek, log.clock): one read of meta per call, not two).
local function event_log(events, done, meta)
  local s = redis.call('HMGET', meta, 'events', 'events_maxlen', 'clock')
  local maxlen = 10000
  local stored = s[2]
  if stored and #stored <= 9 and string.find(stored, '^%d+$') then
    local n = tonumber(stored)
    if n >= 1 and n <= 100000000 then maxlen = n end
  end
  return { key = events, done = done, off = s[1] == 'off', maxlen = maxlen,
           fields = {}, lists = {}, by = {}, n = 0, clock = s[3] }
end
