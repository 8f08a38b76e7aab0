-- enqueue.lua: create jobs, one or many in one call (fewer past its time budget); an existing id
--              is left alone.
-- transition: (none) -> pending | scheduled
-- clock: server TIME (never behind the queue's meta clock), for enqueued_at and the due time of delayed jobs
-- flags: none (it adds work: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:scheduled  ZSET  ids waiting, score = due ms epoch
-- KEYS[2]  leaseq:{<queue>}:meta       HASH  counters, seq, incarnation
-- KEYS[3]  leaseq:{<queue>}:wake       LIST  wake-up tokens for blocked claimers
-- KEYS[4]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[5]  leaseq:{<queue>}:deadlines  ZSET  ids with a start-by deadline, score = it, ms epoch
-- ARGV[1]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  max_attempts, of every job in the call (integer >= 1)
-- ARGV[3]  delay_ms, of every job in the call (integer ms >= 0, 0 = claimable now)
-- ARGV[4]  priority, of every job in the call (integer 0..1000000, lower runs first)
-- ARGV[5]  group, of every job in the call ('' = none; a fair group's name, checked by the caller)
-- ARGV[6]  kind, of every job in the call (string, the job-id rules; '' = no kind)
-- ARGV[7]  timeout_ms, of every job in the call (integer ms >= 1; 0 = none): how long a
--          handler may run before its worker fails the attempt; stored as the row's timeout
-- ARGV[8]  traceparent, of every job in the call (W3C 'version-traceid-spanid-flags', checked by
--          the caller; '' = none: the field is then not written)
-- ARGV[9]   unique, the uniqueness keys of the jobs, one per job in job order, joined by single
--           spaces ('' = none in this call; '{}' = this job has none; keys follow the job-id rules)
-- ARGV[10]  unique_period_ms, the throttle window (integer ms >= 0; 0 = the key is held while
--           its holder is unfinished)
-- ARGV[11]  unique_replace, 1 = a duplicate replaces the holder's payload (keep-last), 0 = not
-- ARGV[12]  numbered, 1 = every row gets an `incarnation` (the call holds ids the caller chose,
--           or uniqueness keys), 0 = none does: every id was made by leaseq, and such a row's
--           number is its enqueued_at (lib/row_number.lua); but while the clock floor holds
--           the queue's time, every row is numbered
-- ARGV[13]  seq_from, the call's FIFO numbers ('' = reserve one per job sent now: the
--           i-th job sent gets the reserved base + i; a number: the i-th job gets seq_from + i,
--           for the rest of a call that stopped at its time budget, so that the calls of one
--           batch, sent together, keep its order whichever runs first; lib/reserve_seq.lua)
-- ARGV[14]  cost, of every job in the call (a finite number > 0 as decimal text; '' = the
--           default, 1: the field is then not written)
-- ARGV[15]  expires, the start-by deadline of every job in the call ('' = none; '+<ms>': that
--           long after now, the enqueue's server time; '<ms>': that ms epoch): a job not
--           claimed by then is dead-lettered (lib/expire_due.lua); stored as expires_at
-- ARGV[16..] jobs, two values per job: id (string, chosen by the client so that a
--           replayed call finds its own rows), payload (bytes, encoded and size-checked)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the job rows, each with a queue-unique incarnation (job_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix);
--          leaseq:{<queue>}:history:m:<minute>, :history:t:<ten-minute>  HASH  history counts (history_prefix)
-- returns: one value per job looked at: 1 if created, 0 if the id existed, or the holder's id
--          (string) when a job holding its uniqueness key exists (lib/unique_holder.lua: then
--          nothing is created; with unique_replace the holder's payload is replaced, or a
--          successor parked); fewer values than jobs when the call stopped at its time budget
--          (lib/over_budget.lua): the jobs past the last value were not looked at, and then a
--          last value {'SEQ', base} says the FIFO base the call used (the rest's seq_from is
--          base plus the values before it)
-- errors: {{'COST', why}} (its only value) when the cost is above the queue's or the group's
--         cost budget, which no claim could ever fit: nothing is written
--!include lib/bump_counter.lua
--!include lib/call_chunked.lua
--!include lib/check_ready.lua
--!include lib/cost_check.lua
--!include lib/elapsed_us.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/over_budget.lua
--!include lib/push_ready.lua
--!include lib/reserve_incarnations.lua
--!include lib/reserve_seq.lua
--!include lib/unique_holder.lua
--!include lib/wake_if_first.lua

local scheduled, meta, wake = K.scheduled, K.meta, K.wake
local job_prefix, max_attempts = A.job_prefix, A.max_attempts
local delay_ms, priority = tonumber(A.delay_ms), tonumber(A.priority)
local group = A.group ~= '' and A.group or nil
local kind = A.kind
local timeout_ms = tonumber(A.timeout_ms)
local traceparent = A.traceparent
local n = (#ARGV - TAIL.args + 1) / 2
-- A cost above a whole budget could never be claimed: refused before anything is written.
local cost = A.cost ~= '' and tonumber(A.cost) or 1
local why = cost_check(K, cost, group)
if why then return { { 'COST', why } } end
if delay_ms == 0 then check_ready(K) end -- ready and pending are written after the rows
local started_us = elapsed_us()
local log = event_log(K.events, nil, meta)
local now = now_ms(meta, false, log.clock)
local unpack_ = table.unpack or unpack

-- The fields every row of the call shares; a row's own payload (and number) go
-- in base[8] (and base[12]) as it is written.
local uniq = A.unique ~= '' and unique_holder(K, A, now, job_prefix) or nil
-- Row numbers: one HINCRBY a page numbers its rows. A row's incarnation is
-- never reused in this queue, so a lease of an earlier row under the same id
-- (deleted, expired, purged, then enqueued again with attempts back at 0)
-- can never match the new row, even when its attempt number does.
-- Rows under ids leaseq made need no number of their own (lib/row_number.lua):
-- that saves the row ~40 bytes and this call a write. But while the clock
-- floor holds the queue's time still (after a failover onto a server whose
-- clock is behind: the moment replies get lost and calls replayed), a replay
-- of this call would write the same enqueued_at: then the rows are numbered.
local numbered = A.numbered ~= '0' or uniq ~= nil or now_ms_held
local base = { 'state', 'pending', 'attempts', 0, 'max_attempts', max_attempts,
               'payload', '', 'enqueued_at', now }
if numbered then
  base[11] = 'incarnation'
  base[12] = 0
end
if priority > 0 then
  base[#base + 1] = 'priority'
  base[#base + 1] = priority
end
if group then
  base[#base + 1] = 'group'
  base[#base + 1] = group
end
if kind ~= '' then
  base[#base + 1] = 'kind'
  base[#base + 1] = kind
end
if timeout_ms > 0 then
  base[#base + 1] = 'timeout'
  base[#base + 1] = timeout_ms
end
if A.cost ~= '' then
  base[#base + 1] = 'cost'
  base[#base + 1] = A.cost
end
local expires_at = nil
if A.expires ~= '' then
  expires_at = string.sub(A.expires, 1, 1) == '+' and now + tonumber(string.sub(A.expires, 2))
    or tonumber(A.expires)
  base[#base + 1] = 'expires_at'
  base[#base + 1] = string.format('%d', expires_at)
end
if traceparent ~= '' then
  base[#base + 1] = 'traceparent'
  base[#base + 1] = traceparent
end
if delay_ms > 0 then
  base[2] = 'scheduled'
  base[#base + 1] = 'run_at'
  base[#base + 1] = now + delay_ms
end
local to = delay_ms > 0 and 'scheduled' or 'pending'
-- FIFO numbers for the whole call up front, one per job sent, so a batch's calls
-- sent together keep its order even when one stops at its budget and its rest
-- comes after later calls (gaps, for ids that existed, cost nothing).
local seq = 0
if delay_ms == 0 then
  seq = A.seq_from ~= '' and tonumber(A.seq_from) or reserve_seq(K, n)
end
local nb = #base
local incarnation = 0

-- Page by page (PAGE jobs), while the time budget lasts (over_budget): the jobs
-- not looked at get no reply value, and the caller sends them again.
-- Dedup first: an id whose row exists, whatever its state (even succeeded
-- or dead), changes nothing. That is also what makes a replayed call safe.
-- Then uniqueness: a job whose key has a holder is not created (the holder's
-- id is its reply), or replaces the holder's payload, or is parked behind an
-- active holder (lib/unique_holder.lua).
-- A call with uniqueness keys is one page: keep-last (unique_replace) may change the
-- body of any earlier job of the call, so none is written before all are seen.
local PAGE = uniq and n or 16
local out, fresh, parked = {}, {}, {}
local due, ready, deadlines = {}, {}, {}
local looked = 0
while looked < n do
  local first = #fresh + 1
  for i = looked + 1, math.min(n, looked + PAGE) do
    local id = ARGV[TAIL.args - 2 + i * 2]
    if redis.call('EXISTS', job_prefix .. id) == 1 or fresh[id] then
      out[i] = 0
    else
      local verdict = uniq and uniq.take(i, id, ARGV[TAIL.args - 1 + i * 2]) or nil
      if verdict == nil then
        fresh[id] = i
        fresh[#fresh + 1] = i
        out[i] = 1
      elseif verdict == true then
        parked[#parked + 1] = i
        fresh[id] = i
        out[i] = 1
      else
        out[i] = verdict
      end
    end
  end
  looked = math.min(n, looked + PAGE)
  if numbered and #fresh >= first then
    incarnation = reserve_incarnations(meta, #fresh - first + 1, now)
  end
  for f = first, #fresh do
    local i = fresh[f]
    local id = ARGV[TAIL.args - 2 + i * 2]
    log_event(log, 'new', to, id, 0)
    base[8] = ARGV[TAIL.args - 1 + i * 2]
    if numbered then
      incarnation = incarnation + 1
      base[12] = string.format('%d', incarnation) -- 16 digits: see reserve_incarnations
    end
    if uniq then base[8] = uniq.row(i, base, nb) end
    redis.call('HSET', job_prefix .. id, unpack_(base))
    if expires_at then
      deadlines[#deadlines + 1] = expires_at
      deadlines[#deadlines + 1] = id
    end
    if delay_ms > 0 then
      due[#due + 1] = now + delay_ms
      due[#due + 1] = id
    else
      -- Made claimable below in one batch by push_ready, as every script that makes
      -- jobs ready does: the FIFO sequence, the fair group, the wake-up tokens.
      ready[#ready + 1] = { priority, id, group, seq + i }
    end
  end
  if looked < n and over_budget(started_us) then break end
end
if looked < n then out[#out + 1] = { 'SEQ', seq } end
local created = #fresh + #parked
if created == 0 then return out end
if numbered and #parked > 0 then incarnation = reserve_incarnations(meta, #parked, now) end
if uniq then uniq.park(parked, base, nb, incarnation, log) end
call_chunked('ZADD', K.deadlines, deadlines, 1000)
if delay_ms > 0 then
  call_chunked('ZADD', scheduled, due, 1000)
  wake_if_first(scheduled, wake, now + delay_ms)
else
  push_ready(K, ready)
end
bump_counter(K, 'enqueued', created, now)
flush_events(log, now)
return out
