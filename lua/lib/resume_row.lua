-- resume_row(K, job, id, state, priority, attempts, log, value, key, step): a scheduled or
-- suspended row (state, as the caller read it) becomes pending now: its entry leaves the
-- state's index, its run_at goes, a suspended row's signal wait ends (lib/end_wait.lua:
-- value, key and step as there; a sleep has none), and the move is noted in log (an
-- event_log). Every way out of a wait to pending goes through here: its time came
-- (promote_due), it was run now (run_now.lua), its signal came (signal.lua).
-- The caller has checked K.waiters (lib/check_type.lua) before its first write.
-- KEYS  leaseq:{<queue>}:scheduled  ZSET  ids due later, score = run_at ms epoch
-- KEYS  leaseq:{<queue>}:suspended  ZSET  ids asleep or waiting, score = run_at ms epoch
-- KEYS  leaseq:{<queue>}:pending    ZSET  ids ready to claim
--!include lib/end_wait.lua
--!include lib/log_event.lua
--!include lib/push_pending.lua
--!include lib/to_count.lua
local function resume_row(K, job, id, state, priority, attempts, log, value, key, step)
  if state == 'suspended' then
    redis.call('ZREM', K.suspended, id)
    end_wait(K, job, id, value, key, step)
  else
    redis.call('ZREM', K.scheduled, id)
  end
  redis.call('HDEL', job, 'run_at')
  push_pending(K.pending, K, job, id, to_count(priority) or 0)
  log_event(log, state, 'pending', id, attempts)
end
