-- complete.lua: finish held leases as succeeded, one or many in one call, with their effects.
-- transition: active -> succeeded (the row then lives keep_ms, or is deleted at once)
-- clock: server TIME (never behind the queue's meta clock), for finished_at and retention
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:active     ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[2]  leaseq:{<queue>}:succeeded  ZSET  succeeded ids, score = ms epoch the row expires (10^15 + finished: kept)
-- KEYS[3]  leaseq:{<queue>}:meta       HASH  counters
-- KEYS[4]  leaseq:{<queue>}:wake       LIST  wake-up tokens (pushed when a global limit held a claim)
-- KEYS[5]  leaseq:{<queue>}:done       STREAM  finished ids, for waiters (lib/signal_done.lua)
-- KEYS[6]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[7..]  *{<queue>}*  ANY  one key per effect, in effect order: an application
--           key carrying the hash tag {<queue>} (checked by the caller), of the type its command needs
-- ARGV[1]  keep_ms, how long to keep the succeeded row (integer ms; 0 = delete now, -1 = until purged)
-- ARGV[2]  keep_count, the most succeeded rows kept (integer; -1 = no bound); the oldest go first
-- ARGV[3]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string), for the rows keep_count trims
-- ARGV[4]  n, the number of items (integer >= 1)
-- ARGV[5]  extras, how many items carry a result or effects (integer >= 0)
-- ARGV[6..] items, four values per item: id (string), token (decimal string), incarnation
--           (decimal string), fence (string); then per item that carries a result, effects or a
--           cost (extras of them, in item order): its place i (integer, 1 = the first item),
--           result (encoded bytes; '' = none), e (its number of effects, integer >= 0), spent
--           (what the run cost, a finite number >= 0 as decimal text, settled in the cost
--           windows: lib/settle_spent.lua; '' = none); then per effect, in that order:
--           command (HINCRBY HSET SADD ZADD INCRBY SET XADD), argc (integer >= 1), then argc
--           arguments that follow the key. Most items carry neither: four values each keep
--           the call small for the common case.
-- derives: leaseq:{<queue>}:job:<id>  HASH  each item's row, the oldest succeeded rows, deleted
--          past keep_count, and the rows of the jobs' parents and children (job_prefix);
--          leaseq:{<queue>}:graph:<id>  SET  a job's waiting children (graph_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix);
--          leaseq:{<queue>}:history:m:<minute>, :history:t:<ten-minute>  HASH  history counts (history_prefix)
-- returns: the items refused, each as {i, 'LOST', state, attempts, incarnation, fence} or {i, 'EFFECT', k, why}
--          when effect k of item i cannot apply (then nothing of that item is written);
--          and last, {i, 'LATER'} when the call stopped at its time budget (lib/over_budget.lua)
--          before item i: items i..n were not looked at (the caller sends them again);
--          an item not listed succeeded ({} when all did)
-- errors: none beyond the per-item replies
--!include lib/allow_oom.lua
--!include lib/apply_effect.lua
--!include lib/bump_counter.lua
--!include lib/call_chunked.lua
--!include lib/check_ready.lua
--!include lib/effect_refusal.lua
--!include lib/elapsed_us.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/free_unique.lua
--!include lib/group_done.lua
--!include lib/job_finished.lua
--!include lib/lease_check.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/over_budget.lua
--!include lib/retain_rows.lua
--!include lib/settle_spent.lua
--!include lib/signal_done.lua
--!include lib/tally.lua
--!include lib/trim_count.lua
--!include lib/trim_finished.lua
--!include lib/unpin_parent.lua

local started_us = elapsed_us()
local active, succeeded, meta, wake = K.active, K.succeeded, K.meta, K.wake
allow_oom(meta) -- a full server must still let this script drain the queue
local keep_ms, keep_count = tonumber(A.keep_ms), tonumber(A.keep_count)
local job_prefix = A.job_prefix
local n = tonumber(A.n)
-- Read the clock only once an item is accepted: a call refused whole
-- (stale tokens, a replay) must change nothing, the clock floor included.
local now = nil
local out = {}
local done_jobs, done_ids, retained_ids, pinned = {}, {}, {}, {}
local log = event_log(K.events, K.done, meta)
-- The few items with a result or effects come after the n items of four values.
local results, effects_of, spent = {}, {}, {}
local extras = tonumber(A.extras)
local ek, ea = TAIL.keys, TAIL.args + 4 * n + 4 * extras
for x = 1, extras do
  local base = TAIL.args + 4 * n + 4 * (x - 1)
  local i = tonumber(ARGV[base])
  results[i] = ARGV[base + 1]
  if ARGV[base + 3] ~= '' then spent[i] = ARGV[base + 3] end
  local effects = {}
  for k = 1, tonumber(ARGV[base + 2]) do
    local argc = tonumber(ARGV[ea + 1])
    local args = {}
    for a = 1, argc do args[a] = ARGV[ea + 1 + a] end
    effects[k] = { ARGV[ea], KEYS[ek], args }
    ea, ek = ea + 2 + argc, ek + 1
  end
  effects_of[i] = effects
end
local NO_EFFECTS = {}
-- Fair groups: the leases ended per group, written with one group_done a group after
-- the loop (a group held at its cap rejoins the rotation once, in the order the
-- call first ended one of its leases; every row's group was read by lease_check).
local ended = {} -- ipairs gives its groups (tally)
-- Workflows: the finished children per parent, each parent unpinned once after the loop.
local unpins = {}

local later = nil -- the first item not looked at, once the time budget is spent
local ready_sound = false -- LIST ready and ZSET pending checked (check_ready)
for i = 1, n do
  -- The budget is looked at every 8 items; the first item is always done. Half of
  -- it: the batched writes after the loop (indexes, retention, trims) cost about
  -- as much as the loop.
  if i % 8 == 1 and i > 1 and over_budget(started_us, 0.5) then
    later = i
    break
  end
  local base = TAIL.args + (i - 1) * 4
  local id, token, incarnation, fence = ARGV[base], ARGV[base + 1], ARGV[base + 2], ARGV[base + 3]
  local job = job_prefix .. id
  local result = results[i] or ''
  local effects = effects_of[i] or NO_EFFECTS
  local refused, group, links, unique = lease_check(job, token, incarnation, fence)
  if not refused then
    for k, e in ipairs(effects) do
      local why = effect_refusal(e[1], e[2], e[3])
      if why then
        refused = { 'EFFECT', k, why }
        break
      end
    end
  end
  -- A finished parent's children and a parked job of its uniqueness key become ready:
  -- only then must LIST ready and ZSET pending be sound (lib/check_ready.lua). With one
  -- damaged, the items done so far are written and the call stops here, as at its
  -- budget; the caller's next call starts with this item and raises, nothing written.
  if not refused and not ready_sound and (links[2] or unique[2]) then
    if check_ready(K, #done_ids > 0) then
      later = i
      break
    end
    ready_sound = true
  end
  if refused then
    table.insert(refused, 1, i) -- the reply lists only refusals, each by its item's place
    out[#out + 1] = refused
  else
    -- The effects and the completion are one script: a lease that holds
    -- applies both, a lost one (or a replay) applies neither.
    now = now or now_ms(meta, false, log.clock)
    if group then tally(ended, group, 1) end
    if spent[i] then settle_spent(K, job, id, token, incarnation, group, spent[i]) end
    free_unique(K, job, id, now, unique)
    for _, e in ipairs(effects) do apply_effect(e[1], e[2], e[3]) end
    redis.call('HSET', job, 'state', 'succeeded', 'finished_at', now)
    redis.call('HDEL', job, 'lease_until', 'prefetched') -- the lease's fields go with it
    if result ~= '' then
      redis.call('HSET', job, 'result', result)
    end
    log_event(log, 'active', 'succeeded', id, token)
    if job_finished(K, id, job, 'succeeded', now, log, links, unpins) then
      -- Pinned by children that have not finished: its retention waits for them.
      redis.call('HSET', job, 'keep', keep_ms)
      pinned[#pinned + 1] = 1000000000000000 + now
      pinned[#pinned + 1] = id
    else
      done_jobs[#done_jobs + 1] = job
      retained_ids[#retained_ids + 1] = id
    end
    done_ids[#done_ids + 1] = id
  end
end
for _, g in ipairs(ended) do group_done(K, nil, g, ended[g]) end
local done = #done_ids
if done > 0 then
  signal_done(K.done, done_ids)
  flush_events(log, now)
end
if done > 0 then
  -- The index moves and retention are batched: one ZREM, one ZADD (or DEL)
  -- per 1000 rows.
  call_chunked('ZREM', active, done_ids, 1000)
  -- retained_ids: the rows under the usual retention (done_jobs); pinned: the others.
  retain_rows(done_jobs, retained_ids, succeeded, now, keep_ms)
  call_chunked('ZADD', succeeded, pinned, 1000)
  -- Each parent unpinned once with all its children of the call: one SREM, HMGET and
  -- HINCRBY a parent. After the pinned rows are indexed: an item can be a parent of
  -- another (a child that runs on its parent's failure, the parent retried), and
  -- its last pin going here must give it its retention, not leave it indexed as kept.
  for _, parent in ipairs(unpins) do unpin_parent(K, parent, unpins[parent], now) end
  bump_counter(K, 'succeeded', done, now)
  local trimmed = trim_finished(succeeded, now, 100 + done)
  -- Past keep_count, the oldest rows go too: at most done + 100 per call, so
  -- the set shrinks back even after keep_count was lowered.
  if keep_ms ~= 0 then
    trim_count(succeeded, job_prefix, 'succeeded', keep_count, 100 + done - trimmed, now)
  end
  -- Slots freed under a concurrency limit: wake the claimers it held back,
  -- one token per freed slot (64 at most).
  if redis.call('HDEL', meta, 'limit_held') == 1 then
    local tokens = {}
    for t = 1, math.min(done, 64) do tokens[t] = '1' end
    redis.call('RPUSH', wake, (table.unpack or unpack)(tokens))
  end
end
if later then out[#out + 1] = { later, 'LATER' } end
return out
