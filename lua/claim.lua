-- claim.lua: lease up to count jobs, after promoting due jobs and reaping a few expired leases.
-- transition: pending -> active (and scheduled -> pending, active -> pending | dead on the way;
--             a pending row that cannot run -- damaged, out of attempts, past its start-by
--             deadline -> dead; pending | scheduled past that deadline -> dead)
-- clock: server TIME, for the lease deadline, promotion and reaping
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[2]  leaseq:{<queue>}:scheduled  ZSET  ids waiting, score = due ms epoch
-- KEYS[3]  leaseq:{<queue>}:active     ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[4]  leaseq:{<queue>}:dead       ZSET  dead ids, score = died ms epoch
-- KEYS[5]  leaseq:{<queue>}:meta       HASH  counters, seq, clock
-- KEYS[6]  leaseq:{<queue>}:wake       LIST  wake-up tokens
-- KEYS[7]  leaseq:{<queue>}:limits     HASH  global limits: concurrency, rate, per_ms
-- KEYS[8]  leaseq:{<queue>}:claims     ZSET  claim times of the rate span, score = ms epoch
-- KEYS[9]  leaseq:{<queue>}:done       STREAM  finished ids, for waiters (lib/signal_done.lua)
-- KEYS[10] leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[11] leaseq:{<queue>}:group_active HASH  group -> leases active now
-- KEYS[12] leaseq:{<queue>}:group_rate_held  ZSET  groups held back at their rate, score = ms epoch
--           they may claim again (lib/rotate_groups.lua)
-- KEYS[13] leaseq:{<queue>}:suspended  ZSET  ids asleep, score = run_at ms epoch (the wait's end)
-- KEYS[14] leaseq:{<queue>}:deadlines  ZSET  ids with a start-by deadline, score = it, ms epoch
--           (lib/expire_due.lua); a job leased here has met its deadline and leaves it
-- KEYS[15] leaseq:{<queue>}:ready      LIST  ungrouped ids of priority 0 ready to claim, FIFO (lib/take_ready.lua)
-- ARGV[1]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  count, how many jobs to lease at most (integer >= 1; more than 1000 lease 1000;
--          fewer once the call has worked its time budget: lib/over_budget.lua)
-- ARGV[3]  lease_ms, the lease length (integer ms >= 1)
-- ARGV[4]  worker, the worker id, stored in the row (string)
-- ARGV[5]  sweep, the maintenance limit: most scheduled jobs to promote and expired leases to reap (integer >= 0)
-- ARGV[6]  started, how many of the leased jobs go to a handler at once (integer >= 0); the rest
--          are prefetched: their row gets prefetched = attempts, so a crash does not charge them
-- ARGV[7]  group_prefix, 'leaseq:{<queue>}:group:' (string): a fair group's ready ids are
--          the ZSET group_prefix .. <name>
-- ARGV[8]  fence, this call's random name (string, from the client), stored in every row it
--          leases: with attempts it is the lease's fencing token (lib/lease_check.lua), and a
--          claim that a failover lost has a fence the promoted replica never wrote
-- derives: leaseq:{<queue>}:job:<id>  HASH  the rows it leases, promotes, reaps, and their
--          parents and children (job_prefix);
--          leaseq:{<queue>}:graph:<id>  SET  a job's waiting children (graph_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix);
--          leaseq:{<queue>}:group_claims:<name>  ZSET  a group's recent claims (group_claims_prefix);
--          leaseq:{<queue>}:group_costs:<name>  ZSET  a group's cost window (group_costs_prefix);
--          leaseq:{<queue>}:history:m:<minute>, :history:t:<ten-minute>  HASH  history counts (history_prefix)
-- returns: flat array: now_ms, wait_ms (when nothing was leased: ms until the next scheduled job is due
--          or the earliest lease ends; -1 if none, if jobs were leased, or while the queue is
--          paused: then sleep on the wake list, which resume.lua fills;
--          or, when a global limit held the claim back, ms until a slot frees),
--          k, cut (1: the call stopped at its time budget or its count of entries, more
--          may be ready; else 0);
--          when k > 0, then w and the w field names of a lease (LEASE below: id, attempts
--          = the fencing token, incarnation = the row's (0 for a row written before
--          incarnations), max_attempts, lease_until and enqueued_at (ms epoch), payload,
--          kind ('' = none), timeout_ms (the handler's limit; 0 = none), traceparent
--          ('' = none), depends_on (parent ids separated by spaces; '' = none)), then w values per leased job in that order: read by name
-- errors: none of its own; a row that cannot be claimed is dead-lettered with last_error
--         (as is one whose cost is above a whole cost limit: lib/cost_gate.lua, and one
--         past its start-by deadline: lib/expire_due.lua)
--!include lib/allow_oom.lua
--!include lib/apply_limits.lua
--!include lib/bump_counter.lua
--!include lib/call_chunked.lua
--!include lib/check_ready.lua
--!include lib/cost_gate.lua
--!include lib/dead_letter.lua
--!include lib/deadline_text.lua
--!include lib/elapsed_us.lua
--!include lib/event_log.lua
--!include lib/expire_due.lua
--!include lib/flush_events.lua
--!include lib/in_ready.lua
--!include lib/job_finished.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/over_budget.lua
--!include lib/pending_score.lua
--!include lib/promote_due.lua
--!include lib/read_row.lua
--!include lib/reap_expired.lua
--!include lib/rotate_groups.lua
--!include lib/row_number.lua
--!include lib/settle_deferred.lua
--!include lib/state_kind.lua
--!include lib/take_ready.lua
--!include lib/tally.lua
--!include lib/to_count.lua

local started_us = elapsed_us()
local pending, scheduled, active, dead, meta, wake =
  K.pending, K.scheduled, K.active, K.dead, K.meta, K.wake
allow_oom(meta) -- a full server must still let this script drain the queue
check_ready(K) -- before any write: promotions and reaps push to ready and pending
local job_prefix = A.job_prefix
-- Bounded work per call whatever the caller asks: at most 1000 leases, and
-- at most 1000 stale or unclaimable entries popped on top of them; and a time
-- budget (over_budget): a claim that has worked it stops with what it leased.
local count = math.min(tonumber(A.count), 1000)
local budget = count + 1000
local lease_ms = tonumber(A.lease_ms)
local worker, fence = A.worker, A.fence
local limit = tonumber(A.sweep)
local started = tonumber(A.started) or count
local log = event_log(K.events, K.done, meta)
local now = now_ms(meta, false, log.clock)

-- The loops below stop at LOOP_SHARE of the time budget: what comes after them (the
-- active ZADD, the events, a reply of 11 fields a lease) takes about half as long again,
-- and a worker sends claims back to back, so the whole call is what another client waits.
local LOOP_SHARE = 0.6
-- Maintenance in pages of SWEEP_PAGE, up to limit each, while the time budget lasts:
-- start-by deadlines first (a job that missed one is not promoted to run), then
-- promotions and expired leases. A dead-lettering costs ~10 us, a few times a
-- promotion: the deadlines go 8 a page, within half the budget.
local SWEEP_PAGE = 16
for _ = 1, math.ceil(limit / 8) do
  if over_budget(started_us, 0.5) or expire_due(K, job_prefix, now, 8, log) < 8 then break end
end
for _ = 1, math.ceil(limit / SWEEP_PAGE) do
  if promote_due(K, job_prefix, now, SWEEP_PAGE, log) < SWEEP_PAGE
      or over_budget(started_us, LOOP_SHARE) then break end
end
for _ = 1, math.ceil(limit / SWEEP_PAGE) do
  local requeued, died = reap_expired(active, pending, dead, K, job_prefix, now, SWEEP_PAGE, log)
  if requeued + died < SWEEP_PAGE or over_budget(started_us, LOOP_SHARE) then break end
end
if limit > 0 then
  -- Children of a big parent that its finishing call left to settle (workflows).
  settle_deferred(K, now, log, 1000, started_us)
end

if redis.call('HGET', meta, 'paused') then
  -- Paused (pause.lua): lease nothing. Drop the wake tokens so blocked
  -- claimers sleep instead of spinning; resume.lua pushes fresh ones.
  redis.call('DEL', wake)
  flush_events(log, now)
  return { now, -1, 0, 0 }
end

local out = {}
local got = 0
local leased = {}
local deadline = now + lease_ms
-- Global limits: fewer leases, or none and how long until a
-- slot frees. A held claim marks meta 'limit_held' so that the next
-- completion wakes a blocked claimer, and clears the wake list: nothing
-- can be claimed before then, so waking anyone sooner would only poll.
local held_ms, rate_on
count, held_ms, rate_on = apply_limits(K.limits, K.claims, active, now, count)
if count == 0 and (redis.call('LLEN', K.ready) > 0 or redis.call('ZCARD', pending) > 0) then
  redis.call('HSET', meta, 'limit_held', 1)
  redis.call('DEL', wake)
  flush_events(log, now)
  return { now, held_ms, 0, 0 }
end
-- Cost limits (nil: none set): a job whose cost has no room in the queue's window
-- stops the claim (cost_free_at: when it will have room); one with no room in its
-- group's window sends the group out of the rotation until then (as at its rate).
-- Made past the return above: it trims its windows as it is made, and only
-- gate.write() takes what it trimmed off their sums.
local gate = cost_gate(K, now)
local cost_free_at = nil

-- The fields of a lease in the reply. The reply names them once, and
-- leaseq.store.claim (parse_claim) reads each lease by these names; here each value is
-- written at its name's place (AT), so the list's order is stated once.
local LEASE = { 'id', 'attempts', 'incarnation', 'max_attempts', 'lease_until',
                'enqueued_at', 'payload', 'kind', 'timeout_ms', 'traceparent', 'depends_on' }
local WIDTH, AT = #LEASE, {}
for i, name in ipairs(LEASE) do AT[name] = i - 1 end
-- Leases active per group, as lease_one leaves them (rotate_groups reads each once),
-- and the leases the call adds to each group, written with one HINCRBY a group at the end.
local group_active, group_added = {}, {} -- group_added: ipairs gives its groups (tally)
local met = {} -- leased ids that had a start-by deadline (expires_at)
-- Lease one popped id if its row can run; true if leased, and then the claim's own
-- name '<id>:<attempts>:<incarnation>' (a rate log's member: no other claim has it).
-- from: the group whose ready set the id came from (nil: pending; true: LIST ready,
-- then false, nil, true for a stale entry: lib/take_ready.lua). An entry a
-- cancel or delete left there, whose id was made again in another group (or
-- none), is not this row's: false, nil, true (left alone, pending entry too).
-- A job a cost limit holds back: false, nil, nil, then 'queue' or 'group' and when
-- it will fit (ms epoch), nothing written: the caller puts its id back.
local tried = 0 -- popped ids looked at (leased or not): the time budget's pace
local function lease_one(id, from)
    tried = tried + 1
    local job = job_prefix .. id
    local row = read_row(job, 'state', 'attempts', 'max_attempts',
      'payload', 'enqueued_at', 'incarnation', 'group', 'kind', 'timeout', 'traceparent',
      'depends_on', 'cost', 'expires_at', 'priority')
    if from == true then
      -- An entry of LIST ready whose job left without a claim is stale (lib/take_ready.lua):
      -- its row is gone, in another of leaseq's states, or pending in ZSET pending (made
      -- again in a group or at another priority). A pending row edited by hand into a
      -- group or a priority is in no ZSET: it is claimed here. A damaged one is dead-lettered below.
      local gone = row and not row[1] and redis.call('EXISTS', job) == 0
      local moved = row and row[1] and row[1] ~= 'pending' and state_kind(row[1])
      if gone or moved or (row and row[1] == 'pending' and not in_ready(row[1], row[7], row[14])
          and redis.call('ZSCORE', pending, id)) then
        return false, nil, true
      end
    elseif from and row and row[1] and row[7] ~= from then
      -- Indexed as its own group's (or as ungrouped): not this entry's. A row
      -- edited by hand out of its group is claimed here, as before.
      local elsewhere
      if row[7] then
        elsewhere = redis.call('ZSCORE', K.group_prefix .. row[7], id)
      else
        -- Ungrouped: in pending below PENDING_GROUPED, or else, of priority 0, in LIST ready.
        local score = redis.call('ZSCORE', pending, id)
        elsewhere = (score and tonumber(score) < PENDING_GROUPED)
          or (not score and in_ready(row[1], row[7], row[14]))
      end
      if elsewhere then return false, nil, true end
    end
    local not_a_hash = not row
    if not_a_hash then
      -- Overwritten by hand with another type: park the id in dead for an
      -- operator to see (there is no row to write a reason into).
      row = {}
      redis.call('ZADD', dead, now, id)
      bump_counter(K, 'dead', 1, now)
      log_event(log, 'damaged', 'dead', id, 0)
      job_finished(K, id, job, 'dead', now, log) -- its children must not wait forever
    end
    local state = row[1]
    local attempts, max_attempts = to_count(row[2]), to_count(row[3])
    local claimable = state == 'pending' and attempts and max_attempts and row[4]
      and attempts < max_attempts
    local hold, detail = nil, nil -- lib/cost_gate.lua: when, or why it never will
    -- A deadline edited by hand to anything but ms digits is damage, read as
    -- passed (as get() reads the row: DamagedRow), and dead-lettered saying so.
    local expires_at = row[13] and to_count(row[13])
    local late = claimable and row[13] and (expires_at or now) <= now
    if gate and claimable and not late then hold, detail = gate.check(row[12], row[7]) end
    if hold and hold ~= 'dead' then
      if hold == 'queue' then cost_free_at = detail end
      return false, nil, nil, hold, detail
    end
    if late and not expires_at then
      dead_letter(job, dead, K, log, id, now, 'damaged row: expires_at=' .. row[13], 'pending',
        row[2])
    elseif late then
      -- Its start-by deadline has passed (expires=): never run.
      dead_letter(job, dead, K, log, id, now, deadline_text(row[13]), 'pending', row[2])
      bump_counter(K, 'past_deadline', 1, now)
    elseif hold == 'dead' then
      dead_letter(job, dead, K, log, id, now, detail, 'pending', row[2])
    elseif claimable then
      attempts = attempts + 1
      if got >= started then -- one HSET either way: this runs once per leased job
        redis.call('HSET', job, 'state', 'active', 'attempts', attempts,
          'lease_until', deadline, 'claimed_at', now, 'worker', worker, 'fence', fence,
          'prefetched', attempts)
      else
        redis.call('HSET', job, 'state', 'active', 'attempts', attempts,
          'lease_until', deadline, 'claimed_at', now, 'worker', worker, 'fence', fence)
      end
      -- Fair groups: the row's group counts one more lease (group_done undoes it).
      local group = row[7]
      if group then
        tally(group_added, group, 1)
        if group_active[group] then group_active[group] = group_active[group] + 1 end
      end
      leased[#leased + 1] = deadline
      leased[#leased + 1] = id
      got = got + 1
      log_event(log, 'pending', 'active', id, attempts)
      local at = #out + 1
      out[at + AT.id] = id
      out[at + AT.attempts] = attempts
      -- The row's number as stored (up to 16 digits, past to_count's 15): the
      -- lease hands it back verbatim and lease_check compares it as text.
      out[at + AT.incarnation] = row_number(row[6], row[5])
      out[at + AT.max_attempts] = max_attempts
      out[at + AT.lease_until] = deadline
      out[at + AT.enqueued_at] = to_count(row[5]) or now -- a hand-edited time must not break the claim
      out[at + AT.payload] = row[4]
      out[at + AT.kind] = row[8] or ''
      out[at + AT.timeout_ms] = to_count(row[9]) or 0 -- a hand-edited timeout reads as none
      out[at + AT.traceparent] = row[10] or ''
      out[at + AT.depends_on] = row[11] or ''
      if row[13] then met[#met + 1] = id end -- its start-by deadline is met
      local name = id .. ':' .. attempts .. ':' .. out[at + AT.incarnation]
      if gate then gate.take(row[12], row[7], now .. ':' .. name) end
      return true, name
    elseif (state and (state == 'pending' or not state_kind(state)))
        or (not state and not not_a_hash and redis.call('EXISTS', job) == 1) then
      -- A row that can never be claimed as it stands: dead-letter it with
      -- the reason, so it neither blocks the queue nor vanishes.
      local why
      if not state then
        why = 'damaged row: state missing'
      elseif not state_kind(state) then
        why = 'damaged row: unknown state ' .. state
      elseif not attempts or not max_attempts then
        why = 'damaged row: attempts=' .. (row[2] or 'missing') ..
          ' max_attempts=' .. (row[3] or 'missing')
      elseif not row[4] then
        why = 'damaged row: payload missing'
      else
        why = 'no attempts left (' .. attempts .. ' of ' .. max_attempts .. ')'
      end
      dead_letter(job, dead, K, log, id, now, why,
        (state and state_kind(state)) and state or 'damaged', row[2])
    end
    -- else: a stale index entry (row gone or in another state); dropped.
    return false
end

-- The time budget, looked at every BUDGET_EVERY ids looked at (a lease costs ~10-40 us,
-- so does dead-lettering one past its deadline; a look is one TIME): once it is spent the
-- call counts as full, so both paths below stop where they are (rotate_groups puts back
-- what it popped ahead), leased or not: the reply's cut sends the caller back for the rest.
-- The ungrouped path pops CLAIM_PAGE ids at a time and looks after each page.
local BUDGET_EVERY, CLAIM_PAGE = 4, 8
local full, checked = false, 0
local function leased_so_far()
  if not full and tried >= checked + BUDGET_EVERY then
    checked = tried
    full = over_budget(started_us, LOOP_SHARE)
  end
  return (full or cost_free_at) and count or got
end
-- Fair groups first (rotation between the groups with ready jobs and the
-- ungrouped jobs as one more turn), then the ungrouped path as before.
budget = rotate_groups(pending, K, count, budget, lease_one, leased_so_far, now,
  group_active, group_added)
-- Then LIST ready (ungrouped jobs of priority 0, the first to run), a page at a time,
-- and the rest of pending (higher priority numbers) by score.
while not full and not cost_free_at and got < count and budget > 0 do
  local popped, held = take_ready(K, math.min(count - got, budget, CLAIM_PAGE), lease_one)
  if popped == 0 or held then break end
  budget = budget - popped
  full = over_budget(started_us, LOOP_SHARE)
end
while not full and not cost_free_at and got < count and budget > 0 do
  local popped = redis.call('ZPOPMIN', pending, math.min(count - got, budget, CLAIM_PAGE))
  if #popped == 0 then break end
  budget = budget - #popped / 2
  local grouped_at = nil
  for i = 1, #popped, 2 do
    -- Scores from PENDING_GROUPED up are grouped ids (push_pending): their turn comes
    -- only through rotate_groups, so they go back and the loop ends. So does a job
    -- that the queue's cost window has no room for, and every one behind it.
    if tonumber(popped[i + 1]) >= PENDING_GROUPED then grouped_at = i break end
    local _, _, _, held = lease_one(popped[i])
    if held then grouped_at = i break end
  end
  if grouped_at then
    local back = {}
    for i = grouped_at, #popped, 2 do
      back[#back + 1] = popped[i + 1]
      back[#back + 1] = popped[i]
    end
    call_chunked('ZADD', pending, back, 1000)
    break
  end
  -- Looked at after every page (stale and late entries lease nothing, yet take time
  -- too): each page took its ids out of pending, so a claim cut short this way still
  -- made headway, and its caller claims again for the rest (cut).
  full = over_budget(started_us, LOOP_SHARE)
end

if got > 0 then
  -- Every lease of the call shares one deadline: one ZADD indexes them all.
  call_chunked('ZADD', active, leased, 1000)
  call_chunked('ZREM', K.deadlines, met, 1000)
end
for _, group in ipairs(group_added) do
  redis.call('HINCRBY', K.group_active, group, group_added[group])
end

if gate then gate.write() end
if cost_free_at and got == 0 then
  -- Held by the queue's cost window: as when a global limit holds the claim (above).
  redis.call('HSET', meta, 'limit_held', 1)
  redis.call('DEL', wake)
  flush_events(log, now)
  return { now, math.max(0, cost_free_at - now), 0, 0 }
end

if rate_on and got > 0 then
  -- Record this call's claims in the rate span (members unique per claim).
  local stamps = {}
  for i = 1, #out, WIDTH do
    stamps[#stamps + 1] = now
    stamps[#stamps + 1] = now .. ':' .. out[i + AT.id] .. ':' .. out[i + AT.attempts] .. ':'
      .. out[i + AT.incarnation]
  end
  call_chunked('ZADD', K.claims, stamps, 1000)
end

local listed = redis.call('LLEN', K.ready)
if listed == 0 then
  redis.call('HDEL', meta, 'ready_stale') -- no entry left to be stale (lib/unready.lua)
end
if listed == 0 and redis.call('ZCARD', pending) == 0 then
  -- Nothing left to wake anyone for; a later enqueue pushes a fresh token.
  redis.call('DEL', wake)
end

-- How long a blocked claimer may sleep before something changes by itself:
-- the next scheduled job falls due (or a sleep ends), or the earliest lease runs out (then a
-- claim reaps it). Enqueues wake it sooner through the wake list. Only a
-- claim that got nothing sleeps, so only then is it worth working out.
local wait_ms = -1
for _, index in ipairs(got == 0 and { scheduled, K.suspended, active, K.group_rate_held } or {}) do
  local head = redis.call('ZRANGE', index, 0, 0, 'WITHSCORES')
  if #head > 0 and head[2] ~= 'inf' then -- a wait for a signal alone has no end
    local ms = math.max(0, tonumber(head[2]) - now)
    if wait_ms < 0 or ms < wait_ms then wait_ms = ms end
  end
end
flush_events(log, now)
-- Cut short by time or by count (the count bound stays for a server with neither a moving
-- TIME nor a CPU clock in its sandbox): either way more may be ready behind what it popped.
local head = { now, wait_ms, got, ((full or budget <= 0) and got < count) and 1 or 0 }
if got > 0 then
  head[5] = WIDTH
  for i = 1, WIDTH do head[5 + i] = LEASE[i] end
end
for i = 1, #out do head[#head + 1] = out[i] end
return head
