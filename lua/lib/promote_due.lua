-- promote_due(K, job_prefix, now, limit, log): move the
-- jobs whose time has come (score <= now) to pending: at most limit scheduled
-- ones (a delay, a retry's backoff) and at most limit suspended ones (a
-- handler's sleep ended, or a signal wait's timeout: its step is recorded as timed out,
-- lib/end_wait.lua), noting each move in log (event_log; lib/resume_row.lua). Returns how
-- many it moved.
-- KEYS  leaseq:{<queue>}:scheduled  ZSET  ids due later, score = run_at ms epoch
-- KEYS  leaseq:{<queue>}:suspended  ZSET  ids asleep (current_job().sleep), score = run_at ms epoch
-- KEYS  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS  leaseq:{<queue>}:waiters  ZSET  '<signal key> <id>' of every job waiting for a signal, score 0
--!include lib/check_type.lua
--!include lib/read_row.lua
--!include lib/resume_row.lua
--!include lib/state_kind.lua
local function promote_due(K, job_prefix, now, limit, log)
  local moved = 0
  for _, from in ipairs({ { K.scheduled, 'scheduled' }, { K.suspended, 'suspended' } }) do
    local ids = redis.call('ZRANGEBYSCORE', from[1], '-inf', now, 'LIMIT', 0, limit)
    if #ids > 0 and from[2] == 'suspended' then check_type(K.waiters, 'zset') end
    for _, id in ipairs(ids) do
      local job = job_prefix .. id
      local row = read_row(job, 'state', 'priority', 'attempts')
      -- The row is the truth: an index entry whose row is gone or moved on
      -- is simply dropped. A wait that ends by its time records '' as its step.
      if row and row[1] == from[2] then
        resume_row(K, job, id, from[2], row[2], row[3], log, '')
      else
        redis.call('ZREM', from[1], id)
        if (not row or not row[1] or not state_kind(row[1])) and redis.call('EXISTS', job) == 1 then
          -- Damaged by hand (not a hash, no state, a state leaseq never
          -- writes): hand it to pending as it is, where claim dead-letters it
          -- with the reason rather than let it vanish from every index.
          redis.call('ZADD', K.pending, 0, id)
        end
      end
    end
    moved = moved + #ids
  end
  return moved
end
