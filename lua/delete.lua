-- delete.lua: delete one job that holds no lease: its row and its index entry.
-- transition: waiting | pending | scheduled | succeeded | dead | cancelled | damaged -> (deleted)
-- clock: server TIME, read without moving the queue's floor, to stamp the event-stream entry (and,
--        moving it, when an unfinished job's children are settled: lib/job_finished.lua)
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row (a key of another type, damaged by hand, goes too)
-- KEYS[2]  leaseq:{<queue>}:meta       HASH  the event switch (fields events, events_maxlen), clock
-- KEYS[3]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[4]  leaseq:{<queue>}:done       STREAM  ids waiters look at (lib/signal_done.lua): a job deleted
--          before it finished is signalled, so its waiters find it gone at once
-- KEYS[5]  leaseq:{<queue>}:waiters    ZSET  '<signal key> <id>' of every job waiting for a signal, score 0
-- ARGV[1]  id, the job id (string)
-- ARGV[2]  graph_prefix, 'leaseq:{<queue>}:graph:' (string): a job's children still waiting
--          for it are the SET graph_prefix .. <id>
-- derives: leaseq:{<queue>}:job:<id>  HASH  the job's parents and children (job_prefix);
--          leaseq:{<queue>}:graph:<id>  SET  a job's waiting children (graph_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix)
-- returns: {'OK', state} with the state the job was in ('damaged' for a row without a known one)
-- errors: {'GONE'} for an unknown id; {'STATE', 'active'} while a lease is held;
--         {'PINNED', n} for a finished job that n unfinished children still depend on
--!include lib/check_ready.lua
--!include lib/check_type.lua
--!include lib/end_wait.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/free_unique.lua
--!include lib/job_finished.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/signal_done.lua
--!include lib/state_indexes.lua
--!include lib/state_kind.lua
--!include lib/unready.lua
local job, id = K.job, A.id
if redis.call('EXISTS', job) == 0 then return { 'GONE' } end
-- pcall, not TYPE: a key of another type answers HGET with WRONGTYPE, and
-- the commands stay those a least-privilege ACL user already has.
local state = redis.pcall('HGET', job, 'state')
if type(state) == 'table' or not state then state = 'damaged' end
-- An active row is a held lease: deleting it would let the holder's
-- complete meet a missing row. Let it finish, or expire and be reaped.
if state == 'active' then return { 'STATE', state } end
if state == 'suspended' then check_type(K.waiters, 'zset') end -- before any write
check_ready(K) -- its children may become ready
local attempts = redis.pcall('HGET', job, 'attempts')
if not state_kind(state) then state = 'damaged' end
-- A finished row that unfinished children still need (pinned), or whose
-- children are still being settled, stays: deleting it would let its id be
-- used again while they refer to it (docs/workflows.md).
if state_kind(state) == 'finished' then
  local pins = tonumber(redis.pcall('HGET', job, 'children')) or 0
  if pins > 0 or redis.call('EXISTS', K.graph_prefix .. id) == 1 then
    return { 'PINNED', pins }
  end
end
local log = event_log(K.events, nil, K.meta)
local now = nil
if state_kind(state) ~= 'finished' then
  -- A job that will never finish now: its parents and children are settled
  -- first (its waiting children are cancelled or counted, by their policy).
  now = now_ms(K.meta)
  job_finished(K, id, job, 'deleted', now, log)
end
free_unique(K, job, id, now or now_ms(K.meta, true))
if state == 'suspended' then end_wait(K, job, id, nil) end
redis.call('DEL', job)
-- Every index but active's (an active row was refused above): a damaged row's
-- id may be in any of them.
for _, index in ipairs(state_indexes(K, 'active')) do
  if index.state == 'pending' then
    unready(K, id, state) -- an entry of LIST ready stays, counted stale
  else
    redis.call('ZREM', index.key, id)
  end
end
log_event(log, state, 'deleted', id, type(attempts) == 'string' and attempts or 0)
if log.n > 0 then flush_events(log, now or now_ms(K.meta, true)) end
-- A job that had not finished will never finish now: its waiters learn it is gone.
if state_kind(state) ~= 'finished' then signal_done(K.done, id) end
return { 'OK', state }
