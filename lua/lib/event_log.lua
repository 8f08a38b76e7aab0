-- event_log(events, done, meta): this call's log of job transitions, to hand to
-- log_event() and, once, to flush_events(). events is the queue's event STREAM
-- ('leaseq:{<queue>}:events'), done its done STREAM (signal_done); meta is read
-- once (HMGET) for the per-queue switch: field 'events' = 'off' records nothing,
-- field 'events_maxlen' = the approximate bound in entries (default 100000).
-- Returns the table { key, done, off, maxlen, fields, lists, by, n } (by: the lists
-- by from-state then to-state, so that noting a transition builds no field name).
local function event_log(events, done, meta)
  local s = redis.call('HMGET', meta, 'events', 'events_maxlen')
  local maxlen = tonumber(s[2] or '')
  if not maxlen or maxlen < 1 then maxlen = 100000 end
  return { key = events, done = done, off = s[1] == 'off', maxlen = maxlen,
           fields = {}, lists = {}, by = {}, n = 0 }
end
