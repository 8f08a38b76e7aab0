-- flush_events(log, now): write the transitions noted in log (event_log) to the
-- event stream, at most 10 transitions an entry: XADD <events> MAXLEN ~ <maxlen> *
-- at <now, ms epoch> n <count> then one field per from>to group whose value is its
-- 'id:attempt' list joined by single spaces, groups in order of first appearance.
-- Why 10: MAXLEN bounds entries, not transitions, so an entry holding a whole
-- 1,000-job batch would let the default 10,000 entries hold 10 million
-- transitions (~400 MB); at 10 an entry the stream holds between maxlen and
-- 10 x maxlen transitions (~0.4 to ~4 MB by default) whatever the batch sizes,
-- for one XADD per 10 jobs. Nothing is written when the log is empty or the
-- queue's events are off, or when the stream key holds another type.
local EVENTS_PER_ENTRY = 10
local function flush_events(log, now)
  if log.off or log.n == 0 then return end
  local at = string.format('%d', now)
  local entries, args, taken = {}, nil, 0
  for _, field in ipairs(log.fields) do
    local list = log.lists[field]
    local i = 1
    while i <= #list do
      if not args or taken == EVENTS_PER_ENTRY then
        args, taken = { 'MAXLEN', '~', string.format('%d', log.maxlen), '*', 'at', at, 'n', 0 }, 0
        entries[#entries + 1] = args
      end
      local last = math.min(#list, i + EVENTS_PER_ENTRY - taken - 1)
      args[#args + 1] = field
      args[#args + 1] = table.concat(list, ' ', i, last)
      taken = taken + (last - i + 1)
      args[8] = taken
      i = last + 1
    end
  end
  for _, entry in ipairs(entries) do
    -- pcall: the stream is written last, after the call's real writes, and Redis
    -- keeps those when a script fails; a stream key overwritten by hand with
    -- another type must not turn them into a half-done call that raises (a claim
    -- whose lease nobody gets). The log is lost while the key is damaged;
    -- reading it (Queue.events, event_settings) raises DamagedKey.
    local res = redis.pcall('XADD', log.key, (table.unpack or unpack)(entry))
    if type(res) == 'table' and res.err then return end
  end
end
