-- retry_row(job, dead, pending, K, id, extra, op, log): give the dead job
-- extra attempts on top of those it used and make it pending again. op, when
-- not nil, names the retry-all run doing it: a row that run already retried
-- (it died again since) answers {'SKIP'} and stays dead. A retry is noted
-- in log (an event_log) as dead -> pending. Returns {'OK', max_attempts}, {'GONE'} or
-- {'STATE', state} (both drop the stale dead-set entry), {'SKIP'}, or
-- {'DAMAGED', field, value} (the entry stays, so the row stays findable), or
-- {'SETTLING'} while its children are still being settled (K.graph_prefix .. id).
-- A job with parents (field depends_on) pins them again while it is unfinished
-- (pin_parent: K needs job_prefix, succeeded and cancelled), so a rerun can still
-- read their results; a parent whose row is gone stays gone.
-- KEYS  leaseq:{<queue>}:meta  HASH  counter retried, clock
-- ARGV  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string), for the job's parents
-- ARGV  graph_prefix, 'leaseq:{<queue>}:graph:' (string): a dead job whose children are still being settled (the SET graph_prefix .. <id>) is not retried yet
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/pin_parent.lua
--!include lib/push_pending.lua
--!include lib/read_row.lua
--!include lib/state_kind.lua
--!include lib/to_count.lua
local function retry_row(job, dead, pending, K, id, extra, op, log)
  local row = read_row(job, 'state', 'attempts', 'priority', 'retry_op', 'depends_on')
  if not row then return { 'DAMAGED', '<key>', 'not a hash' } end
  if row[1] ~= 'dead' then
    if row[1] and not state_kind(row[1]) or not row[1] and redis.call('EXISTS', job) == 1 then
      return { 'DAMAGED', 'state', row[1] or '' }
    end
    redis.call('ZREM', dead, id)
    if not row[1] then return { 'GONE' } end
    return { 'STATE', row[1] }
  end
  if op and row[4] == op then return { 'SKIP' } end
  -- Its children are still being settled as a dead job's (the releasing list): a
  -- retry now would let its next finish settle the rest as its own. Soon done.
  if redis.call('EXISTS', K.graph_prefix .. id) == 1 then return { 'SETTLING' } end
  local attempts = to_count(row[2])
  if not attempts then return { 'DAMAGED', 'attempts', row[2] or '' } end
  -- attempts is the fencing token and never goes down: a zombie from an old
  -- attempt must not match a new lease. So the bound moves up instead.
  local max_attempts = attempts + extra
  redis.call('HSET', job, 'max_attempts', max_attempts)
  if op then redis.call('HSET', job, 'retry_op', op) end
  -- A start-by deadline does not carry over: a retry runs with none, unless its caller
  -- gives a new one (retry.lua, ARGV expires).
  redis.call('HDEL', job, 'finished_at', 'expires_at')
  redis.call('ZREM', dead, id)
  redis.call('HINCRBY', K.meta, 'retried', 1)
  push_pending(pending, K, job, id, to_count(row[3]) or 0)
  log_event(log, 'dead', 'pending', id, attempts)
  if row[5] then
    local now = now_ms(K.meta, true)
    for parent in string.gmatch(row[5], '%S+') do
      local state = redis.pcall('HGET', K.job_prefix .. parent, 'state')
      if type(state) == 'string' and state_kind(state) then pin_parent(K, parent, state, 1, now) end
    end
  end
  return { 'OK', max_attempts }
end
