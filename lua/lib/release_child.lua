-- release_child(K, id, job, delay, priority, now, log): a waiting job (row key job)
-- whose parents are all done runs now: out of ZSET K.waiting into pending
-- (push_pending, with its priority and fair group), or into K.scheduled when its
-- row held a delay (field delay, ms: counted from now). Noted in log as
-- waiting -> pending | scheduled.
--!include lib/log_event.lua
--!include lib/push_pending.lua
--!include lib/wake_if_first.lua
local function release_child(K, id, job, delay, priority, now, log)
  redis.call('ZREM', K.waiting, id)
  if delay and delay > 0 then
    redis.call('HSET', job, 'state', 'scheduled', 'run_at', now + delay)
    redis.call('HDEL', job, 'delay')
    redis.call('ZADD', K.scheduled, now + delay, id)
    wake_if_first(K.scheduled, K.wake, now + delay)
    log_event(log, 'waiting', 'scheduled', id, 0)
  else
    push_pending(K.pending, K, job, id, priority)
    log_event(log, 'waiting', 'pending', id, 0)
  end
end
