-- reap.lua: hand back up to limit expired leases (fewer past the time budget): to pending while
--           attempts remain, else dead.
-- transition: active -> pending | dead (last_error says the lease expired); pending | scheduled
--             -> dead past a start-by deadline (lib/expire_due.lua)
-- clock: server TIME (never behind the queue's meta clock), to tell which leases have expired
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:active     ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[2]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[3]  leaseq:{<queue>}:dead       ZSET  dead ids, score = died ms epoch
-- KEYS[4]  leaseq:{<queue>}:meta       HASH  counters, seq
-- KEYS[5]  leaseq:{<queue>}:wake       LIST  wake-up tokens
-- KEYS[6]  leaseq:{<queue>}:done       STREAM  finished ids, for waiters (lib/signal_done.lua)
-- KEYS[7]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[8]  leaseq:{<queue>}:releasing  LIST  parents whose children are left to settle, '<how> <id>' (lib/settle_children.lua)
-- KEYS[9]  leaseq:{<queue>}:deadlines  ZSET  ids with a start-by deadline, score = it, ms epoch (lib/expire_due.lua)
-- ARGV[1]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  limit, the most index entries to look at (integer >= 1)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the job rows, their parents and children (job_prefix);
--          leaseq:{<queue>}:graph:<id>  SET  a job's waiting children (graph_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix);
--          leaseq:{<queue>}:history:m:<minute>, :history:t:<ten-minute>  HASH  history counts (history_prefix)
-- returns: {requeued, died, more} -- died counts the jobs past their start-by deadline too
--          (lib/expire_due.lua); more is 1 when expired entries (or children to settle, or
--          such jobs) remain
-- errors: none
--!include lib/allow_oom.lua
--!include lib/check_ready.lua
--!include lib/elapsed_us.lua
--!include lib/event_log.lua
--!include lib/expire_due.lua
--!include lib/flush_events.lua
--!include lib/now_ms.lua
--!include lib/over_budget.lua
--!include lib/reap_expired.lua
--!include lib/settle_deferred.lua
--!include lib/sweep_waiting.lua

local active, pending, dead, meta, wake = K.active, K.pending, K.dead, K.meta, K.wake
allow_oom(meta) -- a full server must still let this script drain the queue
check_ready(K) -- before any write
local started_us = elapsed_us()
local now = now_ms(meta)
local log = event_log(K.events, K.done, meta)
-- In pages of 16 while the time budget lasts (over_budget).
local requeued, died, limit = 0, 0, tonumber(A.limit)
while limit > 0 do
  local r, d = reap_expired(active, pending, dead, K, A.job_prefix, now, math.min(limit, 16), log)
  requeued, died, limit = requeued + r, died + d, limit - 16
  if r + d < 16 or over_budget(started_us) then break end
end
-- Children of a big parent that its finishing call left to settle (workflows),
-- and waiting jobs whose parent went without finishing (deleted or damaged by hand).
settle_deferred(K, now, log, tonumber(A.limit), started_us)
sweep_waiting(K, now, log, 100)
-- Start-by deadlines that have passed (expires=), 8 a page while half the budget
-- lasts (the events of each, flushed after the loop, cost about as much again);
-- the jobs it dead-letters count in died.
for _ = 1, math.ceil(tonumber(A.limit) / 8) do
  if over_budget(started_us, 0.5) then break end
  local looked, late = expire_due(K, A.job_prefix, now, 8, log)
  died = died + late
  if looked < 8 then break end
end
flush_events(log, now)
local more = 0
if #redis.call('ZRANGEBYSCORE', active, '-inf', now, 'LIMIT', 0, 1) > 0
    or #redis.call('ZRANGEBYSCORE', K.deadlines, '-inf', now, 'LIMIT', 0, 1) > 0
    or redis.call('LLEN', K.releasing) > 0 then
  more = 1
end
return { requeued, died, more }
