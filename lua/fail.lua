-- fail.lua: record a handler failure: retry after retry_ms while attempts remain, else dead-letter.
-- transition: active -> scheduled (retry_ms > 0) | pending (retry_ms = 0) | dead
-- clock: server TIME (never behind the queue's meta clock), for the retry's due time and finished_at
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- KEYS[2]  leaseq:{<queue>}:active     ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[3]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[4]  leaseq:{<queue>}:scheduled  ZSET  ids waiting, score = due ms epoch
-- KEYS[5]  leaseq:{<queue>}:dead       ZSET  dead ids, score = died ms epoch
-- KEYS[6]  leaseq:{<queue>}:meta       HASH  counters, seq
-- KEYS[7]  leaseq:{<queue>}:wake       LIST  wake-up tokens
-- KEYS[8]  leaseq:{<queue>}:done       STREAM  finished ids, for waiters (lib/signal_done.lua)
-- KEYS[9]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[10] leaseq:{<queue>}:deadlines  ZSET  ids with a start-by deadline, score = it, ms epoch
-- ARGV[1]  id, the job id (string)
-- ARGV[2]  token, the lease's attempts value (decimal string)
-- ARGV[3]  incarnation, the lease's row incarnation (decimal string)
-- ARGV[4]  fence, the lease's fence (its claiming call's random name, string)
-- ARGV[5]  error, the failure text for last_error (string, already trimmed)
-- ARGV[6]  retry_ms, delay before the retry (integer ms >= 0)
-- ARGV[7]  dead_now, 1 to dead-letter whatever attempts remain, else 0
-- ARGV[8]  traceback, the handler's traceback for the traceback field ('' removes it)
-- ARGV[9]  spent, what the run cost (a finite number >= 0 as decimal text; '' = not told),
--          settled in the cost windows (lib/settle_spent.lua)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the job's parents and children (job_prefix);
--          leaseq:{<queue>}:graph:<id>  SET  a job's waiting children (graph_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix);
--          leaseq:{<queue>}:history:m:<minute>, :history:t:<ten-minute>  HASH  history counts (history_prefix)
-- returns: {'OK', new state} -- 'scheduled', 'pending' or 'dead'
-- errors: {'LOST', state, attempts, incarnation, fence} when the lease is not held under token, incarnation and fence
--!include lib/allow_oom.lua
--!include lib/bump_counter.lua
--!include lib/check_ready.lua
--!include lib/dead_letter.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/group_done.lua
--!include lib/lease_check.lua
--!include lib/log_event.lua
--!include lib/note_failure.lua
--!include lib/now_ms.lua
--!include lib/push_pending.lua
--!include lib/settle_spent.lua
--!include lib/to_count.lua
--!include lib/wake_held.lua
--!include lib/wake_if_first.lua

local job, active, pending, scheduled, dead, meta, wake =
  K.job, K.active, K.pending, K.scheduled, K.dead, K.meta, K.wake
allow_oom(meta) -- a full server must still let this script drain the queue
local id, token, err = A.id, A.token, A.error
local retry_ms = tonumber(A.retry_ms)
local refused, group = lease_check(job, token, A.incarnation, A.fence)
if refused then return refused end
check_ready(K) -- before any write

local log = event_log(K.events, K.done, meta)
local now = now_ms(meta, false, log.clock)
if A.spent ~= '' then settle_spent(K, job, id, token, A.incarnation, group, A.spent) end
redis.call('ZREM', active, id)
group_done(K, job, group)
bump_counter(K, 'failed', 1, now)
-- A slot freed under a concurrency limit: wake a claimer it held back.
wake_held(K)
local row = redis.call('HMGET', job, 'attempts', 'max_attempts', 'priority', 'expires_at')
local attempts, max_attempts = to_count(row[1]), to_count(row[2])
if A.dead_now == '1' or not max_attempts or attempts >= max_attempts then
  dead_letter(job, dead, K, log, id, now, err, 'active', token, A.traceback)
  flush_events(log, now)
  return { 'OK', 'dead' }
end
note_failure(job, now, token, retry_ms > 0 and 'scheduled' or 'pending', err, A.traceback)
-- Waiting again: its start-by deadline is swept again (lib/expire_due.lua; its claim took it out).
if to_count(row[4]) then redis.call('ZADD', K.deadlines, row[4], id) end
redis.call('HDEL', job, 'lease_until', 'prefetched')
if retry_ms > 0 then
  redis.call('HSET', job, 'state', 'scheduled', 'run_at', now + retry_ms)
  redis.call('ZADD', scheduled, now + retry_ms, id)
  wake_if_first(scheduled, wake, now + retry_ms)
  log_event(log, 'active', 'scheduled', id, token)
  flush_events(log, now)
  return { 'OK', 'scheduled' }
end
push_pending(pending, K, job, id, to_count(row[3]) or 0)
log_event(log, 'active', 'pending', id, token)
flush_events(log, now)
return { 'OK', 'pending' }
