-- release.lua: hand a held lease back at once (shutdown), without spending the attempt.
-- transition: active -> pending
-- clock: server TIME, read without moving the queue's floor, only to stamp the event-stream entry
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- KEYS[2]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[3]  leaseq:{<queue>}:meta       HASH  counters, seq
-- KEYS[4]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[5]  leaseq:{<queue>}:deadlines  ZSET  ids with a start-by deadline, score = it, ms epoch
-- ARGV[1]  id, the job id (string)
-- ARGV[2]  token, the lease's attempts value (decimal string)
-- ARGV[3]  incarnation, the lease's row incarnation (decimal string)
-- ARGV[4]  fence, the lease's fence (its claiming call's random name, string)
-- ARGV[5]  spent, what the lease cost ('' = its estimate stands; '0' from a worker for a lease
--          whose handler never began): settled in the cost windows (lib/settle_spent.lua)
-- derives: leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix)
-- returns: {'OK'}
-- errors: {'LOST', state, attempts, incarnation, fence} when the lease is not held under token, incarnation and fence;
--         {'DAMAGED', field, value} when max_attempts is not a count (the lease then runs out)
--!include lib/allow_oom.lua
--!include lib/check_ready.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/lease_check.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/push_pending.lua
--!include lib/refund_lease.lua
--!include lib/settle_spent.lua
--!include lib/to_count.lua

local job, pending, meta = K.job, K.pending, K.meta
allow_oom(meta) -- a full server must still let this script drain the queue
local id = A.id
local refused, group = lease_check(job, A.token, A.incarnation, A.fence)
if refused then return refused end
check_ready(K) -- before any write
refused = refund_lease(K, job, id, group)
if refused then return refused end
if A.spent ~= '' then settle_spent(K, job, id, A.token, A.incarnation, group, A.spent, false) end
redis.call('HINCRBY', meta, 'released', 1)
local row = redis.call('HMGET', job, 'priority', 'expires_at')
push_pending(pending, K, job, id, to_count(row[1]) or 0)
-- Waiting again: its start-by deadline is swept again (lib/expire_due.lua; its claim took it out).
if to_count(row[2]) then redis.call('ZADD', K.deadlines, row[2], id) end
local log = event_log(K.events, nil, meta)
log_event(log, 'active', 'pending', id, A.token)
if log.n > 0 then flush_events(log, now_ms(meta, true)) end
return { 'OK' }
