-- log_event(log, from, to, id, attempt): note one transition of job id in log
-- (event_log): from and to are state names, 'new' before an enqueue, 'deleted'
-- after a delete or purge, 'damaged' for a row whose state leaseq cannot read;
-- attempt is the row's attempts after the transition (nil or not a number: 0).
-- Transitions are grouped by from>to in order of first appearance, each group
-- a list of 'id:attempt' strings (ids hold no whitespace). Writes nothing.
local function log_event(log, from, to, id, attempt)
  if log.off then return end
  -- Per job this is on every batch's path (an enqueue_many of 1,000 notes
  -- 1,000): no string is built but the one stored, and attempt 0 (every
  -- enqueue) needs no formatting.
  local tos = log.by[from]
  if not tos then
    tos = {}
    log.by[from] = tos
  end
  local list = tos[to]
  if not list then
    local field = from .. '>' .. to
    list = {}
    tos[to] = list
    log.lists[field] = list
    log.fields[#log.fields + 1] = field
  end
  if attempt == 0 then
    list[#list + 1] = id .. ':0'
  else
    local n = tonumber(attempt)
    if not n or n ~= n or n < 0 or n >= 1e15 then n = 0 end
    list[#list + 1] = id .. ':' .. string.format('%d', math.floor(n))
  end
  log.n = log.n + 1
end
