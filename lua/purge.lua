-- purge.lua: delete one page of the jobs of one state that were in its index when the purge began.
-- transition: waiting | pending | scheduled | succeeded | dead | cancelled -> (deleted)
-- clock: server TIME, read without moving the queue's floor, only to stamp the event-stream entry
--        (the snapshot is the index's highest score at the first page)
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:<state>    ZSET  the index of that state
-- KEYS[2]  leaseq:{<queue>}:meta       HASH  the event switch (fields events, events_maxlen), clock
-- KEYS[3]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[4]  leaseq:{<queue>}:done       STREAM  ids waiters look at (lib/signal_done.lua): purged pending
--          or scheduled jobs are signalled, so their waiters find them gone at once
-- KEYS[5]  leaseq:{<queue>}:waiters    ZSET  '<signal key> <id>' of every job waiting for a signal, score 0
-- KEYS[6]  leaseq:{<queue>}:ready      LIST  ungrouped ids of priority 0 ready to claim, FIFO: purged
--          with pending, first (meta fields ready_popped and ready_stale: lib/take_ready.lua)
-- ARGV[1]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  state, the state being purged (string; never 'active')
-- ARGV[3]  limit, the most index entries to look at in this call (integer >= 1; fewer once
--          the call has worked its time budget: lib/over_budget.lua)
-- ARGV[4]  upto, the snapshot's highest score (a score string; '' on the first page: take it now;
--          'ready:<end>:<began>:<upto>' while a pending purge walks LIST ready, up to place end;
--          began: the ms epoch of its first page)
-- ARGV[5]  after, the cursor's score (a score string; '-inf' on the first page)
-- ARGV[6]  skip, entries at the cursor's score this purge stepped over (integer >= 0)
-- ARGV[7]  graph_prefix, 'leaseq:{<queue>}:graph:' (string): a job's children still waiting
--          for it are the SET graph_prefix .. <id>
-- derives: leaseq:{<queue>}:job:<id>  HASH  the job rows, their parents and children;
--          leaseq:{<queue>}:graph:<id>  SET  a job's waiting children (graph_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix)
-- returns: flat array: deleted, more (1 unless the snapshot's last entry was reached: after a
--          full page, or one cut short at the time budget), upto, the next cursor's score
--          and skip, then id, field, value triples of the jobs stepped over as damaged
-- errors: none; a job key that is not a hash is reported and left alone
--!include lib/check_type.lua
--!include lib/elapsed_us.lua
--!include lib/end_wait.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/free_unique.lua
--!include lib/in_ready.lua
--!include lib/job_finished.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/over_budget.lua
--!include lib/ready_count.lua
--!include lib/signal_done.lua
--!include lib/snapshot_pages.lua
--!include lib/state_kind.lua
--!include lib/to_count.lua
local started_us = elapsed_us()
local index = K.index
local job_prefix, state = A.job_prefix, A.state
-- The snapshot (snapshot_pages): the purge ends at the entry that was last when
-- it began, however many arrive meanwhile. An empty index: nothing to do, nothing written.
local cursor = { upto = A.upto, after = A.after, skip = tonumber(A.skip) }
if cursor.upto == '' and redis.call('ZCARD', index) == 0
    and (state ~= 'pending' or redis.call('LLEN', K.ready) == 0) then
  return { 0, 0, '', cursor.after, cursor.skip }
end
local deleted, damaged, gone = 0, {}, {}
local log = event_log(K.events, nil, K.meta)
-- Unfinished jobs settle their workflows as they go (job_finished), which reads
-- the clock (moving its floor); otherwise it is only read, for the stream and
-- the uniqueness windows.
local unfinished = state_kind(state) == 'unfinished'
if state == 'suspended' then check_type(K.waiters, 'zset') end -- before any write
local now = now_ms(K.meta, not unfinished)
-- Delete a row in this state (got: its state, attempts).
local function remove(id, job, got)
  if unfinished then job_finished(K, id, job, 'deleted', now, log) end
  free_unique(K, job, id, now)
  if state == 'suspended' then end_wait(K, job, id, nil) end
  redis.call('DEL', job)
  deleted = deleted + 1
  log_event(log, state, 'deleted', id, got[2])
  gone[#gone + 1] = id
end
local function finish(more)
  if log.n > 0 then flush_events(log, now) end
  if #gone > 0 and unfinished then signal_done(K.done, gone) end
  local out = { deleted, more, cursor.upto, cursor.after, cursor.skip }
  for i = 1, #damaged do out[#out + 1] = damaged[i] end
  return out
end
-- Pending jobs wait in LIST ready too (ungrouped, priority 0): its part of the snapshot
-- goes first, by place (ready_popped + index never changes while an entry waits).
if state == 'pending' and (cursor.upto == '' or string.sub(cursor.upto, 1, 6) == 'ready:') then
  local popped = to_count(redis.call('HGET', K.meta, 'ready_popped')) or 0
  local stop, began, upto = string.match(cursor.upto, '^ready:(%d+):(%d+):(.*)$')
  if cursor.upto == '' then
    local last = redis.call('ZRANGE', index, -1, -1, 'WITHSCORES')
    stop, began, upto = popped + redis.call('LLEN', K.ready), now, last[2] or ''
  end
  stop, began = tonumber(stop), tonumber(began)
  local looked, limit, stale = 0, tonumber(A.limit), 0
  while looked < limit and popped < stop do
    local ids = redis.call('LPOP', K.ready, math.min(16, limit - looked, stop - popped)) or {}
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      local job = job_prefix .. id
      local got = redis.pcall('HMGET', job, 'state', 'attempts', 'group', 'priority', 'enqueued_at')
      -- As a claim reads it (claim.lua, lease_one): a pending job in ZSET pending is not
      -- this entry's, which is then stale, as when the job has left; nor is a job made
      -- again under this id after the purge began (its own entry is past the snapshot).
      local mine = not got['err'] and got[1] == 'pending'
        and (in_ready(got[1], got[3], got[4]) or not redis.call('ZSCORE', index, id))
        and (to_count(got[5]) or 0) <= began
      if mine then
        remove(id, job, got)
      elseif not got['err'] and ((got[1] and state_kind(got[1])) or redis.call('EXISTS', job) == 0) then
        stale = stale + 1 -- a job that left without a claim (lib/unready.lua)
      else
        -- Damaged by hand: to pending's set as it is, where a claim dead-letters it.
        if got['err'] then
          damaged[#damaged + 1] = id
          damaged[#damaged + 1] = '<key>'
          damaged[#damaged + 1] = 'not a hash'
        end
        redis.call('ZADD', index, 0, id)
      end
    end
    popped, looked = popped + #ids, looked + #ids
    ready_count(K, 'ready_popped', #ids)
    if over_budget(started_us) then break end
  end
  if stale > 0 then ready_count(K, 'ready_stale', -stale) end
  if popped < stop and redis.call('LLEN', K.ready) > 0 then
    cursor.upto = string.format('ready:%d:%d:', stop, began) .. upto
    return finish(1)
  end
  -- The list's part is done: on to the set's, from its snapshot's start.
  cursor.upto = upto
  return finish(upto ~= '' and 1 or 0)
end
local more = snapshot_pages(index, cursor, tonumber(A.limit), 16, started_us, function(id)
  local job = job_prefix .. id
  local got = redis.pcall('HMGET', job, 'state', 'attempts', 'children')
  if got['err'] then
    -- Not a hash (overwritten by hand): not leaseq's to delete. Step over it.
    damaged[#damaged + 1] = id
    damaged[#damaged + 1] = '<key>'
    damaged[#damaged + 1] = 'not a hash'
    return true
  end
  -- Only delete a row that really is in this state; an index entry that
  -- drifted is just dropped, so a purge never takes a job it did not mean to.
  if got[1] == state and not unfinished and ((tonumber(got[3]) or 0) > 0
      or redis.call('EXISTS', K.graph_prefix .. id) == 1) then
    -- A finished row unfinished children still need stays (see delete.lua),
    -- stepped over like a damaged one, and purged once they finish.
    return true
  end
  if got[1] == state then remove(id, job, got) end
  redis.call('ZREM', index, id)
  return false
end)
return finish(more)
