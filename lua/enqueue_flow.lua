-- enqueue_flow.lua: create jobs that depend on other jobs (a workflow), all in one call or none.
-- transition: (none) -> waiting | pending | scheduled | cancelled (a parent already failed)
-- clock: server TIME (never behind the queue's meta clock), for enqueued_at and the due time of delayed jobs
-- flags: none (it adds work: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[2]  leaseq:{<queue>}:scheduled  ZSET  ids waiting for a time, score = due ms epoch
-- KEYS[3]  leaseq:{<queue>}:waiting    ZSET  ids waiting for parents, score = enqueued_at ms epoch
-- KEYS[4]  leaseq:{<queue>}:succeeded  ZSET  succeeded ids (a parent found there is pinned: lib/pin_parent.lua)
-- KEYS[5]  leaseq:{<queue>}:cancelled  ZSET  cancelled ids, score = ms epoch the row expires (10^15 + finished: kept)
-- KEYS[6]  leaseq:{<queue>}:meta       HASH  counters, seq, incarnation
-- KEYS[7]  leaseq:{<queue>}:wake       LIST  wake-up tokens for blocked claimers
-- KEYS[8]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[9]  leaseq:{<queue>}:groups       ZSET  fair groups with ready jobs, score = round-robin turn
-- KEYS[10]  leaseq:{<queue>}:group_held   HASH  groups held back at group_concurrency
-- ARGV[1]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  graph_prefix, 'leaseq:{<queue>}:graph:' (string): a job's children still waiting
--          for it are the SET graph_prefix .. <id>
-- ARGV[3]  group_prefix, 'leaseq:{<queue>}:group:' (string): a fair group's ready ids are
--          the ZSET group_prefix .. <name>
-- ARGV[4]  history_prefix, 'leaseq:{<queue>}:history:' (string): the history buckets are
--          the HASHes history_prefix .. 'm:<minute>' and .. 't:<ten-minute>' (bump_counter)
-- ARGV[5]  traceparent, of every job in the call (W3C, checked by the caller; '' = none)
-- ARGV[6]  flow, the call's flow id (string, the job-id rules; '' = none: not written), stored in
--          every row, so that a replayed call (the same flow id) is answered, not refused
-- ARGV[7]  dedup, 1: a step whose id exists is left alone (enqueue's rule); 0: it is refused
--          whole (enqueue_flow's rule), unless the first step's row carries this flow id (a replay)
-- ARGV[8..] steps, ten values per step: id (string), payload (encoded bytes), max_attempts (integer
--           >= 1), delay_ms (integer ms >= 0), priority (integer 0..1000000), group ('' = none),
--           kind ('' = none), timeout_ms (integer ms; 0 = none), on_parent_failure ('cancel' or
--           'run'), parents (ids separated by single spaces, each an existing job or an earlier
--           step of this call; '' = none)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the new rows and their parents' rows (job_prefix);
--          leaseq:{<queue>}:graph:<id>  SET  a parent's waiting children (graph_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix);
--          leaseq:{<queue>}:history:m:<minute>, :history:t:<ten-minute>  HASH  history counts (history_prefix)
-- returns: one integer per step: 1 if created, 0 if left alone (its id existed; or a replay)
-- errors: {'GONE', parent, step} when a parent is neither a job nor an earlier step;
--         {'DAMAGED', parent, why} when a parent's row cannot be read;
--         {'USED', id} when a step's id is taken (dedup = 0). Nothing is written then.
--!include lib/bump_counter.lua
--!include lib/call_chunked.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/pin_parent.lua
--!include lib/push_pending.lua
--!include lib/reserve_incarnations.lua
--!include lib/state_kind.lua
--!include lib/wake_if_first.lua

local job_prefix, meta = A.job_prefix, K.meta
local W = 10
local n = (#ARGV - TAIL.args + 1) / W
local function arg(i, k) return ARGV[TAIL.args + (i - 1) * W + k] end

-- First pass, nothing written: which steps are new, and does every parent
-- of a new step exist (an earlier step of this call, or a readable row)?
local out, fresh, made, known = {}, {}, {}, {}
for i = 1, n do
  local id = arg(i, 0)
  if redis.call('EXISTS', job_prefix .. id) == 1 or made[id] then
    if A.dedup ~= '1' then
      if i == 1 and A.flow ~= '' and redis.pcall('HGET', job_prefix .. id, 'flow') == A.flow then
        -- The whole call ran before (one script: all of it or none): a replay.
        for j = 1, n do out[j] = 0 end
        return out
      end
      return { 'USED', id }
    end
    out[i] = 0
  else
    for parent in string.gmatch(arg(i, 9), '%S+') do
      if not made[parent] and not known[parent] then
        local state = redis.pcall('HGET', job_prefix .. parent, 'state')
        if type(state) == 'table' then return { 'DAMAGED', parent, 'not a hash' } end
        if not state then return { 'GONE', parent, i } end
        if not state_kind(state) then return { 'DAMAGED', parent, 'state ' .. state } end
        known[parent] = state
      end
    end
    made[id] = 'new'
    fresh[#fresh + 1] = i
    out[i] = 1
  end
end
local created = #fresh
if created == 0 then return out end

local now = now_ms(meta)
local log = event_log(K.events, nil, meta)
local incarnation = reserve_incarnations(meta, created, now)
local unpack_ = table.unpack or unpack
local waiting, cancelled, pins, edges, order = {}, {}, {}, {}, {}
local scheduled_first = nil
for _, i in ipairs(fresh) do
  local id, job = arg(i, 0), job_prefix .. arg(i, 0)
  local delay_ms, parents, policy = tonumber(arg(i, 3)), arg(i, 9), arg(i, 8)
  local left, failed = 0, {}
  for parent in string.gmatch(parents, '%S+') do
    local state = made[parent] or known[parent]
    if state == 'dead' or state == 'cancelled' then
      failed[#failed + 1] = parent
    elseif state ~= 'succeeded' then
      left = left + 1
    end
  end
  incarnation = incarnation + 1
  local row = { 'state', 'pending', 'attempts', 0, 'max_attempts', arg(i, 2),
                'payload', arg(i, 1), 'enqueued_at', now,
                'incarnation', string.format('%d', incarnation) } -- 16 digits: see reserve_incarnations
  local function put(field, value) row[#row + 1] = field row[#row + 1] = value end
  if tonumber(arg(i, 4)) > 0 then put('priority', arg(i, 4)) end
  if arg(i, 5) ~= '' then put('group', arg(i, 5)) end
  if arg(i, 6) ~= '' then put('kind', arg(i, 6)) end
  if tonumber(arg(i, 7)) > 0 then put('timeout', arg(i, 7)) end
  if A.traceparent ~= '' then put('traceparent', A.traceparent) end
  if A.flow ~= '' then put('flow', A.flow) end
  if parents ~= '' then
    put('depends_on', parents)
    put('on_parent_failure', policy)
    if #failed > 0 then put('failed_parents', table.concat(failed, ' ')) end
  end
  local state
  if #failed > 0 and policy ~= 'run' then
    -- A parent already failed: the policy applies at once. Nothing pins or waits.
    state = 'cancelled'
    row[2] = state
    put('finished_at', now)
    put('last_error', 'parent ' .. failed[1] .. ' is ' .. (made[failed[1]] or known[failed[1]]))
    put('parents_left', left)
    cancelled[#cancelled + 1] = 1000000000000000 + now
    cancelled[#cancelled + 1] = id
  else
    if left > 0 then
      state = 'waiting'
      put('parents_left', left)
      if delay_ms > 0 then put('delay', delay_ms) end
      waiting[#waiting + 1] = now
      waiting[#waiting + 1] = id
    elseif delay_ms > 0 then
      state = 'scheduled'
      put('run_at', now + delay_ms)
      if parents ~= '' then put('parents_left', 0) end
    else
      state = 'pending'
      if parents ~= '' then put('parents_left', 0) end
    end
    row[2] = state
    -- Every parent is pinned while this job is unfinished; those that have
    -- not finished also list it among the children waiting for them.
    for parent in string.gmatch(parents, '%S+') do
      if not pins[parent] then
        pins[parent] = 0
        order[#order + 1] = parent
      end
      pins[parent] = pins[parent] + 1
      if state_kind(made[parent] or known[parent]) == 'unfinished' then
        local list = edges[parent]
        if not list then
          list = {}
          edges[parent] = list
        end
        list[#list + 1] = id
      end
    end
  end
  redis.call('HSET', job, unpack_(row))
  made[id] = state
  log_event(log, 'new', state, id, 0)
  if state == 'pending' then
    push_pending(K.pending, K, job, id, tonumber(arg(i, 4)))
  elseif state == 'scheduled' then
    redis.call('ZADD', K.scheduled, now + delay_ms, id)
    if not scheduled_first or now + delay_ms < scheduled_first then scheduled_first = now + delay_ms end
  end
end
for _, parent in ipairs(order) do
  pin_parent(K, parent, made[parent] or known[parent], pins[parent], now)
  if edges[parent] then call_chunked('SADD', K.graph_prefix .. parent, edges[parent], 1000) end
end
call_chunked('ZADD', K.waiting, waiting, 1000)
call_chunked('ZADD', K.cancelled, cancelled, 1000)
if #cancelled > 0 then redis.call('HINCRBY', meta, 'cancelled', #cancelled / 2) end
if scheduled_first then wake_if_first(K.scheduled, K.wake, scheduled_first) end
bump_counter(K, 'enqueued', created, now)
flush_events(log, now)
return out
