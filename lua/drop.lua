-- drop.lua: delete a whole queue, a bounded number of jobs per call; the queue stays paused meanwhile.
-- transition: every state -> (deleted); active too only when forced
-- clock: server TIME (never behind the queue's meta clock), stamped as the pause
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:active     ZSET  ids under lease
-- KEYS[2]  leaseq:{<queue>}:meta       HASH  counters, clock, paused flag
-- KEYS[3]  leaseq:{<queue>}:wake       LIST  wake-up tokens
-- KEYS[4]  leaseq:{<queue>}:done       STREAM  finished ids, for waiters (lib/signal_done.lua)
-- KEYS[5]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[6]  leaseq:{<queue>}:groups       ZSET  fair groups with ready jobs, score = round-robin turn
-- KEYS[7]  leaseq:{<queue>}:group_active HASH  group -> leases active now
-- KEYS[8]  leaseq:{<queue>}:group_held   HASH  groups held back at group_concurrency
-- KEYS[9]  leaseq:{<queue>}:releasing  LIST  parents whose children are left to settle, '<how> <id>' (lib/settle_children.lua)
-- KEYS[10] leaseq:{<queue>}:unique       HASH  uniqueness key -> holder id
-- KEYS[11] leaseq:{<queue>}:unique_windows  ZSET  throttle windows by end
-- KEYS[12] leaseq:{<queue>}:group_rate_held  ZSET  groups held back at their rate
-- KEYS[13] leaseq:{<queue>}:waiters    ZSET  jobs waiting for a signal (current_job().wait_for)
-- KEYS[14] leaseq:{<queue>}:signals    HASH  kept signals: signal key -> payload
-- KEYS[15] leaseq:{<queue>}:signal_ends  ZSET  kept signals' keys by end
-- KEYS[16] leaseq:{<queue>}:costs      ZSET  the cost window (lib/cost_window.lua)
-- KEYS[17] leaseq:{<queue>}:deadlines  ZSET  ids with a start-by deadline
-- KEYS[18] leaseq:{<queue>}:ready      LIST  ungrouped ids of priority 0 ready to claim, FIFO
-- ARGV[1]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  limit, the most jobs to delete in this call (integer >= 1; fewer once the call
--          has worked its time budget: lib/over_budget.lua)
-- ARGV[3]  force, 1 deletes leased (active) jobs too, 0 refuses while any exist
-- ARGV[4]  group_prefix, 'leaseq:{<queue>}:group:' (string): a fair group's ready ids are
--          the ZSET group_prefix .. <name>
-- ARGV[5]  history_prefix, 'leaseq:{<queue>}:history:' (string): the history buckets are
--          the HASHes history_prefix .. 'm:<minute>' and .. 't:<ten-minute>' (bump_counter)
-- ARGV[6]  graph_prefix, 'leaseq:{<queue>}:graph:' (string): a job's waiting children are the
--          SET graph_prefix .. <id>, deleted with its row
-- derives: leaseq:{<queue>}:job:<id>  HASH  the job rows (job_prefix);
--          leaseq:{<queue>}:graph:<id>  SET  a job's waiting children (graph_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix);
--          leaseq:{<queue>}:history:m:<minute>, :history:t:<ten-minute>  HASH  history counts (history_prefix)
-- returns: {'OK', deleted, remaining}; once remaining is 0 the meta hash, wake list, done and events
--          streams are gone too (so the last call's deletions leave no event)
-- errors: {'ACTIVE', n} when not forced and n leases are in flight (nothing written)
--!include lib/allow_oom.lua
--!include lib/check_ready.lua
--!include lib/elapsed_us.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/in_ready.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/over_budget.lua
--!include lib/ready_count.lua
--!include lib/state_indexes.lua
--!include lib/state_kind.lua

local started_us = elapsed_us()
local meta, wake = K.meta, K.wake
allow_oom(meta) -- a full server must still let this script run
local job_prefix, limit, force = A.job_prefix, tonumber(A.limit), A.force == '1'
check_ready(K) -- before any write
local held = redis.call('ZCARD', K.active)
if held > 0 and not force then return { 'ACTIVE', held } end
-- Paused while the drop runs over several calls, so no claim leases a job
-- that the next call deletes.
if not redis.call('HGET', meta, 'paused') then
  redis.call('HSET', meta, 'paused', now_ms(meta))
end
-- In pages of PAGE jobs, up to limit, while the time budget lasts (over_budget;
-- one page at least).
local PAGE = 16
local deleted, budget, cut = 0, limit, false
local log = event_log(K.events, K.done, meta)
-- Delete a job's row and its children's set; returns the row as it was read (state,
-- attempts, group, priority; an 'err' table for a key of another type).
local function drop_job(id)
  local got = redis.pcall('HMGET', job_prefix .. id, 'state', 'attempts', 'group', 'priority')
  local gone = redis.call('DEL', job_prefix .. id)
  redis.call('DEL', K.graph_prefix .. id)
  if gone == 1 then
    local from = not got['err'] and state_kind(got[1] or '') and got[1] or 'damaged'
    log_event(log, from, 'deleted', id, not got['err'] and got[2] or 0)
  end
  deleted = deleted + gone
  return got
end
-- LIST ready first (its entries leave with LPOP, and its counts with them, for a
-- drop stopped half way: lib/take_ready.lua), then every state's index.
while budget > 0 and not cut do
  local ids = redis.call('LPOP', K.ready, math.min(PAGE, budget)) or {}
  local stale = 0
  for _, id in ipairs(ids) do
    local row = drop_job(id)
    if not row['err'] and not in_ready(row[1], row[3], row[4]) then stale = stale + 1 end
  end
  if #ids == 0 then break end
  ready_count(K, 'ready_popped', #ids)
  if stale > 0 then ready_count(K, 'ready_stale', -stale) end
  budget = budget - #ids
  cut = over_budget(started_us)
end
local indexes = state_indexes(K)
for _, index in ipairs(indexes) do
  while budget > 0 and not cut do
    local ids = redis.call('ZRANGE', index.key, 0, math.min(PAGE, budget) - 1)
    for _, id in ipairs(ids) do
      drop_job(id)
      redis.call('ZREM', index.key, id)
    end
    budget = budget - #ids
    if #ids == 0 then break end -- this index is empty: on to the next
    cut = over_budget(started_us)
  end
end
local remaining = redis.call('LLEN', K.ready)
for _, index in ipairs(indexes) do
  remaining = remaining + redis.call('ZCARD', index.key)
end
if remaining > 0 then flush_events(log, now_ms(meta)) end
if remaining == 0 then
  -- The history buckets go too (those that can exist: the last 61 minutes and
  -- the last 145 ten-minutes), and the fair groups' bookkeeping with the jobs
  -- (a forced drop of active grouped jobs would otherwise leave counts that
  -- hold a group forever): a dropped queue leaves nothing behind.
  local now = now_ms(meta)
  local m, t = math.floor(now / 60000), math.floor(now / 600000)
  for i = m - 61, m + 1 do redis.call('DEL', K.history_prefix .. 'm:' .. i) end
  for i = t - 145, t + 1 do redis.call('DEL', K.history_prefix .. 't:' .. i) end
  local names = redis.call('ZRANGE', K.groups, 0, -1)
  local held = redis.call('HGETALL', K.group_held)
  for i = 1, #held, 2 do names[#names + 1] = held[i] end
  for _, g in ipairs(redis.call('ZRANGE', K.group_rate_held, 0, -1)) do names[#names + 1] = g end
  for _, g in ipairs(names) do redis.call('DEL', K.group_prefix .. g) end
  redis.call('DEL', meta, wake, K.groups, K.group_held, K.group_active,
    K.done, K.events, K.releasing, K.unique, K.unique_windows, K.group_rate_held,
    K.waiters, K.signals, K.signal_ends, K.costs, K.deadlines)
end
return { 'OK', deleted, remaining }
