-- enqueue_flow.lua: create jobs that depend on other jobs (a workflow), all in one call or none.
-- transition: (none) -> waiting | pending | scheduled | cancelled (a parent already failed)
-- clock: server TIME (never behind the queue's meta clock), for enqueued_at and the due time of delayed jobs
-- flags: none (it adds work: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:scheduled  ZSET  ids waiting for a time, score = due ms epoch
-- KEYS[2]  leaseq:{<queue>}:waiting    ZSET  ids waiting for parents, score = enqueued_at ms epoch
-- KEYS[3]  leaseq:{<queue>}:cancelled  ZSET  cancelled ids, score = ms epoch the row expires (10^15 + finished: kept)
-- KEYS[4]  leaseq:{<queue>}:meta       HASH  counters, seq, incarnation
-- KEYS[5]  leaseq:{<queue>}:wake       LIST  wake-up tokens for blocked claimers
-- KEYS[6]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[7]  leaseq:{<queue>}:deadlines  ZSET  ids with a start-by deadline, score = it, ms epoch
-- ARGV[1]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  graph_prefix, 'leaseq:{<queue>}:graph:' (string): a job's children still waiting
--          for it are the SET graph_prefix .. <id>
-- ARGV[3]  traceparent, of every job in the call (W3C, checked by the caller; '' = none)
-- ARGV[4]  flow, the call's flow id (string, the job-id rules; '' = none: not written), stored in
--          every row, so that a replayed call (the same flow id) is answered, not refused
-- ARGV[5]  dedup, 1: a step whose id exists is left alone (enqueue's rule); 0: it is refused
--          whole (enqueue_flow's rule), unless the first step's row carries this flow id (a replay)
-- ARGV[6]  profiles, how many option sets the tail opens with (integer >= 1)
-- ARGV[7]  numbered, 1 = every row gets an `incarnation` (the call holds an id the caller
--          chose), 0 = none does unless the clock floor holds the queue's time: every id
--          was made by leaseq, and such a row's number is its enqueued_at (lib/row_number.lua)
-- ARGV[8..]  first the profiles, nine values each: max_attempts (integer >= 1), delay_ms (integer
--           ms >= 0), priority (integer 0..1000000), group ('' = none), kind ('' = none), timeout_ms
--           (integer ms; 0 = none), on_parent_failure ('cancel' or 'run'), cost (decimal text;
--           '' = the default, 1, not written), expires (as enqueue.lua's: '', '+<ms>' or a
--           ms epoch); then the steps, four
--           values each: id (string), payload (encoded bytes), profile (its number, from 1),
--           parents (ids separated by single spaces, each an existing job or an earlier step of
--           this call; '' = none)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the new rows and their parents' rows (job_prefix);
--          leaseq:{<queue>}:graph:<id>  SET  a parent's waiting children (graph_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix);
--          leaseq:{<queue>}:history:m:<minute>, :history:t:<ten-minute>  HASH  history counts (history_prefix)
-- returns: one integer per step: 1 if created, 0 if left alone (its id existed; or a replay)
-- errors: {'GONE', parent, step} when a parent is neither a job nor an earlier step;
--         {'DAMAGED', parent, why} when a parent's row cannot be read;
--         {'USED', id} when a step's id is taken (dedup = 0);
--         {'COST', why} when a step's cost is above a cost budget (lib/cost_check.lua).
--         Nothing is written then.
--!include lib/bump_counter.lua
--!include lib/call_chunked.lua
--!include lib/check_ready.lua
--!include lib/cost_check.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/pin_parent.lua
--!include lib/push_ready.lua
--!include lib/reserve_incarnations.lua
--!include lib/state_kind.lua
--!include lib/tally.lua
--!include lib/wake_if_first.lua

local job_prefix, meta = A.job_prefix, K.meta
-- The profiles, read once: each step names one.
local P = tonumber(A.profiles)
local profile = {}
for p = 1, P do
  local b = TAIL.args + (p - 1) * 9
  profile[p] = { max_attempts = ARGV[b], delay_ms = tonumber(ARGV[b + 1]),
                 priority = tonumber(ARGV[b + 2]), group = ARGV[b + 3], kind = ARGV[b + 4],
                 timeout = ARGV[b + 5], policy = ARGV[b + 6], cost = ARGV[b + 7],
                 expires = ARGV[b + 8] }
  local why = cost_check(K, tonumber(profile[p].cost) or 1,
    profile[p].group ~= '' and profile[p].group or nil)
  if why then return { 'COST', why } end
end
local W, STEPS = 4, TAIL.args + P * 9
local n = (#ARGV - STEPS + 1) / W
local function arg(i, k) return ARGV[STEPS + (i - 1) * W + k] end -- step i's value k
-- A step's parents as a list, split once per distinct text: a fan-out's steps
-- all name the same parents, and each step reads them three times.
local split = {}
local function parents_of(text)
  local list = split[text]
  if not list then
    list = {}
    for parent in string.gmatch(text, '%S+') do list[#list + 1] = parent end
    split[text] = list
  end
  return list
end

-- First pass, nothing written: which steps are new, and does every parent
-- of a new step exist (an earlier step of this call, or a readable row)?
local out, fresh, made, known, incall = {}, {}, {}, {}, {}
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
    for _, parent in ipairs(parents_of(arg(i, 3))) do
      if made[parent] then
        -- A parent made by this call takes its pins in its own HSET (field
        -- children): a fan-in costs no extra call per parent.
        incall[parent] = (incall[parent] or 0) + 1
      elseif not known[parent] then
        local got = redis.pcall('HMGET', job_prefix .. parent, 'state', 'children')
        if got['err'] then return { 'DAMAGED', parent, 'not a hash' } end
        local state = got[1]
        if not state then return { 'GONE', parent, i } end
        if not state_kind(state) then return { 'DAMAGED', parent, 'state ' .. state } end
        -- Its pin count is added to after the rows are written: check it now.
        if got[2] and not string.match(got[2], '^%d+$') then
          return { 'DAMAGED', parent, 'children ' .. got[2] }
        end
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
check_ready(K) -- before any write

local now = now_ms(meta)
local log = event_log(K.events, nil, meta)
-- As in enqueue.lua: rows under ids leaseq made need no number of their own.
local numbered = A.numbered ~= '0' or now_ms_held
local incarnation = numbered and reserve_incarnations(meta, created, now) or 0
local unpack_ = table.unpack or unpack
local waiting, cancelled, ready, due = {}, {}, {}, {}
local pins, edges = {}, {} -- pins: ipairs gives its parents (tally)
local first_due = nil
local row = { 'state', 'pending', 'attempts', 0, 'max_attempts', '', 'payload', '',
              'enqueued_at', now }
local fixed = 10 -- the fields every row has; then its incarnation, if numbered
if numbered then row[11], row[12], fixed = 'incarnation', '', 12 end
-- What a step's parents say, worked out once per distinct parents text (a
-- fan-out's steps all share one): how many have not finished, which failed,
-- and which are unfinished (they list the step among their children). A
-- parent made by this call is written before any step naming it, so its
-- state is settled by the time the first of them asks.
local verdicts = {}
local function verdict_of(text)
  local v = verdicts[text]
  if not v then
    v = { list = parents_of(text), left = 0, failed = nil, unfinished = {} }
    for _, parent in ipairs(v.list) do
      local state = made[parent] or known[parent]
      if state == 'dead' or state == 'cancelled' then
        v.failed = v.failed or {}
        v.failed[#v.failed + 1] = parent
      elseif state ~= 'succeeded' then
        v.left = v.left + 1
      end
      if state_kind(state) == 'unfinished' then v.unfinished[#v.unfinished + 1] = parent end
    end
    verdicts[text] = v
  end
  return v
end
for _, i in ipairs(fresh) do
  local b = STEPS + (i - 1) * W
  local id, parents, pr = ARGV[b], ARGV[b + 3], profile[tonumber(ARGV[b + 2])]
  local policy, delay_ms, priority, group = pr.policy, pr.delay_ms, pr.priority, pr.group
  local verdict = verdict_of(parents)
  local left, failed = verdict.left, verdict.failed
  -- One table serves every row (written up to n): no allocation per step.
  row[6], row[8] = pr.max_attempts, ARGV[b + 1]
  if numbered then
    incarnation = incarnation + 1
    row[12] = string.format('%d', incarnation) -- 16 digits: see reserve_incarnations
  end
  local n = fixed
  if priority > 0 then row[n + 1], row[n + 2], n = 'priority', priority, n + 2 end
  if group ~= '' then row[n + 1], row[n + 2], n = 'group', group, n + 2 end
  if pr.kind ~= '' then row[n + 1], row[n + 2], n = 'kind', pr.kind, n + 2 end
  if pr.timeout ~= '0' then row[n + 1], row[n + 2], n = 'timeout', pr.timeout, n + 2 end
  if pr.cost ~= '' then row[n + 1], row[n + 2], n = 'cost', pr.cost, n + 2 end
  if pr.expires ~= '' then
    local at = string.sub(pr.expires, 1, 1) == '+' and now + tonumber(string.sub(pr.expires, 2))
      or tonumber(pr.expires)
    row[n + 1], row[n + 2], n = 'expires_at', string.format('%d', at), n + 2
    redis.call('ZADD', K.deadlines, at, id)
  end
  if A.traceparent ~= '' then row[n + 1], row[n + 2], n = 'traceparent', A.traceparent, n + 2 end
  if A.flow ~= '' then row[n + 1], row[n + 2], n = 'flow', A.flow, n + 2 end
  if incall[id] then row[n + 1], row[n + 2], n = 'children', incall[id], n + 2 end
  if parents ~= '' then
    row[n + 1], row[n + 2], row[n + 3], row[n + 4], n =
      'depends_on', parents, 'parents_left', left, n + 4
    -- 'cancel' is the default: left out, the row stays small (docs/keys-and-rows.md).
    if policy ~= 'cancel' then row[n + 1], row[n + 2], n = 'on_parent_failure', policy, n + 2 end
    if failed then row[n + 1], row[n + 2], n = 'failed_parents', table.concat(failed, ' '), n + 2 end
  end
  local state
  if failed and policy ~= 'run' then
    -- A parent already failed: the policy applies at once. Nothing pins or waits:
    -- the pins counted for it on a parent made here are taken back below.
    state = 'cancelled'
    row[n + 1], row[n + 2], n = 'finished_at', now, n + 2
    row[n + 1] = 'last_error'
    row[n + 2] = 'parent ' .. failed[1] .. ' is ' .. (made[failed[1]] or known[failed[1]])
    n = n + 2
    cancelled[#cancelled + 1] = 1000000000000000 + now
    cancelled[#cancelled + 1] = id
    for _, parent in ipairs(parents_of(parents)) do
      if incall[parent] then
        if redis.call('HINCRBY', job_prefix .. parent, 'children', -1) <= 0 then
          redis.call('HDEL', job_prefix .. parent, 'children')
        end
      end
    end
  else
    if left > 0 then
      state = 'waiting'
      if delay_ms > 0 then row[n + 1], row[n + 2], n = 'delay', delay_ms, n + 2 end
      waiting[#waiting + 1] = now
      waiting[#waiting + 1] = id
    elseif delay_ms > 0 then
      state = 'scheduled'
      row[n + 1], row[n + 2], n = 'run_at', now + delay_ms, n + 2
      due[#due + 1] = now + delay_ms
      due[#due + 1] = id
      if not first_due or now + delay_ms < first_due then first_due = now + delay_ms end
    else
      state = 'pending'
      ready[#ready + 1] = { priority, id, group ~= '' and group or nil }
    end
    -- Every parent is pinned while this job is unfinished (those made here
    -- already are, above); those that have not finished also list it among
    -- the children waiting for them.
    for _, parent in ipairs(verdict.list) do
      if not incall[parent] then
        tally(pins, parent, 1)
      end
    end
    for _, parent in ipairs(verdict.unfinished) do
      local list = edges[parent]
      if not list then
        list = {}
        edges[parent] = list
        if incall[parent] then tally(pins, parent, 0) end
      end
      list[#list + 1] = id
    end
  end
  row[2] = state
  redis.call('HSET', job_prefix .. id, unpack_(row, 1, n))
  made[id] = state
  log_event(log, 'new', state, id, 0)
end

-- Then the pins of parents that existed before, the edges, one ZADD per index.
for _, parent in ipairs(pins) do
  if pins[parent] > 0 then pin_parent(K, parent, known[parent], pins[parent], now) end
  if edges[parent] then call_chunked('SADD', K.graph_prefix .. parent, edges[parent], 1000) end
end
push_ready(K, ready) -- one HINCRBY of seq, one ZADD per 1000 (and per group)
call_chunked('ZADD', K.waiting, waiting, 1000)
call_chunked('ZADD', K.scheduled, due, 1000)
call_chunked('ZADD', K.cancelled, cancelled, 1000)
if #cancelled > 0 then redis.call('HINCRBY', meta, 'cancelled', #cancelled / 2) end
if first_due then wake_if_first(K.scheduled, K.wake, first_due) end
bump_counter(K, 'enqueued', created, now)
flush_events(log, now)
return out
