-- flush_events(log, now): write the transitions noted in log (event_log) as ONE
-- entry of the event stream, whatever their number: XADD <events> MAXLEN ~
-- <maxlen> * at <now, ms epoch> n <count> then one field per from>to group whose
-- value is its 'id:attempt' list joined by single spaces (table.concat, so a
-- batch of 10,000 costs one string, not 10,000 values on Lua's stack). Nothing
-- is written when the log is empty or the queue's events are off.
local function flush_events(log, now)
  if log.off or log.n == 0 then return end
  local args = { 'MAXLEN', '~', log.maxlen, '*', 'at', string.format('%d', now), 'n', log.n }
  for _, field in ipairs(log.fields) do
    args[#args + 1] = field
    args[#args + 1] = table.concat(log.lists[field], ' ')
  end
  redis.call('XADD', log.key, (table.unpack or unpack)(args))
end
