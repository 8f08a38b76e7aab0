-- cancel.lua: cancel a job: it will never run (again); a running attempt loses its lease.
-- transition: waiting | pending | scheduled | active | suspended -> cancelled (the row then lives keep_ms)
-- clock: server TIME (never behind the queue's meta clock), for finished_at and retention
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- KEYS[2]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[3]  leaseq:{<queue>}:scheduled  ZSET  ids waiting, score = due ms epoch
-- KEYS[4]  leaseq:{<queue>}:cancelled  ZSET  cancelled ids, score = ms epoch the row expires (10^15 + finished: kept)
-- KEYS[5]  leaseq:{<queue>}:meta       HASH  counters, clock
-- KEYS[6]  leaseq:{<queue>}:done       STREAM  finished ids, for waiters (lib/signal_done.lua)
-- KEYS[7]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[8]  leaseq:{<queue>}:waiting    ZSET  ids waiting for parents, score = enqueued_at ms epoch
-- KEYS[9]  leaseq:{<queue>}:active       ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[10] leaseq:{<queue>}:suspended    ZSET  ids asleep or waiting, score = run_at ms epoch
-- KEYS[11] leaseq:{<queue>}:waiters    ZSET  '<signal key> <id>' of every job waiting for a signal, score 0
-- ARGV[1]  id, the job id (string)
-- ARGV[2]  keep_ms, how long to keep the row (integer ms; 0 = delete now, -1 = until purged)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the job's parents and children (job_prefix);
--          leaseq:{<queue>}:graph:<id>  SET  a job's waiting children (graph_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix)
-- returns: {'OK', 1} when cancelled now, {'OK', 0} when it already was
--          (an active job's lease is then lost: its complete, fail and extend raise LeaseLost,
--          and its worker learns it at its next heartbeat; last_error says so)
-- errors: {'GONE'} for an unknown id; {'STATE', state} when the job is past cancelling;
--         {'DAMAGED', '<key>', 'not a hash'} when the job key holds another type
--!include lib/allow_oom.lua
--!include lib/check_type.lua
--!include lib/end_wait.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/free_unique.lua
--!include lib/group_done.lua
--!include lib/job_finished.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/retain_rows.lua
--!include lib/signal_done.lua
--!include lib/state_kind.lua
--!include lib/trim_finished.lua
--!include lib/unready.lua
--!include lib/wake_held.lua

local job, pending, scheduled, cancelled, meta = K.job, K.pending, K.scheduled, K.cancelled, K.meta
allow_oom(meta) -- a full server must still let this script drain the queue
local id = A.id
local state = redis.pcall('HGET', job, 'state')
if type(state) == 'table' and state['err'] then return { 'DAMAGED', '<key>', 'not a hash' } end
if not state then return { 'GONE' } end
if state == 'cancelled' then return { 'OK', 0 } end
if state_kind(state) ~= 'unfinished' then return { 'STATE', state } end
if state == 'suspended' then check_type(K.waiters, 'zset') end -- before any write

local now = now_ms(meta)
unready(K, id, state)
redis.call('ZREM', scheduled, id)
redis.call('ZREM', K.waiting, id)
redis.call('ZREM', K.suspended, id)
-- A job waiting for a signal stops waiting: a signal afterwards resumes nothing.
if state == 'suspended' then end_wait(K, job, id, nil) end
redis.call('HSET', job, 'state', 'cancelled', 'finished_at', now)
redis.call('HDEL', job, 'run_at', 'delay')
if state == 'active' then
  -- Fencing does the rest: the row is no longer active, so the running
  -- attempt's complete, fail and extend are refused (LeaseLost, state cancelled).
  redis.call('ZREM', K.active, id)
  redis.call('HDEL', job, 'lease_until', 'prefetched')
  redis.call('HSET', job, 'last_error',
             'cancelled while running (attempt ' .. (redis.call('HGET', job, 'attempts') or '?') .. ')')
  group_done(K, job, nil)
  -- A slot freed under a concurrency limit: wake a claimer it held back.
  wake_held(K)
end
redis.call('HINCRBY', meta, 'cancelled', 1)
free_unique(K, job, id, now)
signal_done(K.done, id)
local log = event_log(K.events, K.done, meta)
log_event(log, state, 'cancelled', id, redis.call('HGET', job, 'attempts'))
local keep_ms = tonumber(A.keep_ms)
if job_finished(K, id, job, 'cancelled', now, log) then
  -- Pinned by children that have not finished: its retention waits for them.
  redis.call('HSET', job, 'keep', keep_ms)
  redis.call('ZADD', cancelled, 1000000000000000 + now, id)
else
  retain_rows({ job }, { id }, cancelled, now, keep_ms)
end
flush_events(log, now)
trim_finished(cancelled, now, 100)
return { 'OK', 1 }
