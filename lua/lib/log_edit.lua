-- log_edit(K, why, id, state, attempt, old, now): note in the event stream K.events
-- that job id's payload was changed in state without a transition -- why is
-- 'replaced' (a keep-last duplicate) or 'updated' (Queue.update) -- keeping the old
-- payload so the change can be traced and undone. One entry of its own:
-- at <now> n 0 <why> '<id>:<attempt>' state <state> old_payload <bytes>; readers
-- of transitions skip it (no 'from>to' field). Honours the queue's events switch
-- and bound (K.meta, event_log); pcall as in flush_events.
-- KEYS  leaseq:{<queue>}:events  STREAM  job transitions and edits (docs/events.md)
-- KEYS  leaseq:{<queue>}:meta    HASH  the event switch (fields events, events_maxlen), clock
--!include lib/event_log.lua
local function log_edit(K, why, id, state, attempt, old, now)
  local log = event_log(K.events, nil, K.meta)
  if log.off then return end
  redis.pcall('XADD', K.events, 'MAXLEN', '~', string.format('%d', log.maxlen), '*',
              'at', string.format('%d', now), 'n', 0, why, id .. ':' .. (attempt or '0'),
              'state', state, 'old_payload', old or '')
end
