-- extend.lua: push held leases' deadlines to now + lease_ms, a started one's capped at claimed_at + cap_ms.
-- transition: active -> active (a heartbeat; one lease or a worker's many in one call)
-- clock: server TIME (never behind the queue's meta clock), for the new deadlines
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:active     ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[2]  leaseq:{<queue>}:meta       HASH  the queue's clock floor (field clock)
-- KEYS[3..] leaseq:{<queue>}:job:<id>  HASH  one job row per item, in item order
-- ARGV[1]  lease_ms, the new lease length from now (integer ms >= 1)
-- ARGV[2]  cap_ms, the most total lease time one claim may hold, from claimed_at (integer ms >= 1);
--          a lease still prefetched (its handler not started) is not capped
-- ARGV[3]  started, flags, one character per item: '1' = its handler has started (clears the
--          row's prefetched mark, so a crash now charges the attempt, and while the mark was
--          there moves claimed_at to now: the cap counts from the start); '2' = a spare still
--          waiting for a handler (sets the mark, prefetched = token: a crash from now on
--          refunds the attempt); anything else = no news
-- ARGV[4..] items, four values per item: id (string), token (the lease's attempts, decimal string),
--           incarnation (the lease's row incarnation, decimal string), fence (the lease's fence)
-- derives: nothing
-- returns: one reply per item looked at: {'OK', lease_until ms epoch}, {'LOST', state, attempts,
--          incarnation, fence} when the lease is not held under token, or {'CAPPED', deadline ms epoch}
--          when the cap leaves no time at all (nothing written for that item); fewer replies
--          than items when the call stopped at its time budget (lib/over_budget.lua): the
--          items past the last reply were not looked at
-- errors: none beyond the per-item replies
--!include lib/allow_oom.lua
--!include lib/call_chunked.lua
--!include lib/elapsed_us.lua
--!include lib/lease_check.lua
--!include lib/now_ms.lua
--!include lib/over_budget.lua
--!include lib/to_count.lua

local active, meta = K.active, K.meta
allow_oom(meta) -- a full server must still let this script drain the queue
local lease_ms, cap_ms, started = tonumber(A.lease_ms), tonumber(A.cap_ms), A.started
-- The clock is read at the first lease that holds: a call refused whole
-- changes nothing, the clock floor included.
local now = nil
local out, members = {}, {}
local started_us = elapsed_us()

for i = TAIL.keys, #KEYS do
  -- The time budget, looked at every 8 items (the first is always done): the
  -- items past the last reply were not looked at, and the caller sends them again.
  if #out % 8 == 0 and #out > 0 and over_budget(started_us) then break end
  local job = KEYS[i]
  local at = TAIL.args + 4 * (i - TAIL.keys)
  local id, token, incarnation, fence = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local refused = lease_check(job, token, incarnation, fence)
  if refused then
    out[#out + 1] = refused
  else
    -- A prefetched lease's wait for a slot is no handler's time, so the cap
    -- leaves it alone: capped while it waits, it would expire unstarted and be
    -- refunded, again at every claim, until the refunds ran out and the wait
    -- alone spent its attempts. Its handler starting moves claimed_at to now:
    -- the cap counts from there. Once only: the mark goes with the first news.
    -- A crash while it waits is still refunded, at most reap_expired's bound.
    local flag = started:sub(i - 2, i - 2)
    local waiting = redis.call('HGET', job, 'prefetched') == token
    local starts = waiting and flag == '1'
    if starts then
      waiting = false
      redis.call('HDEL', job, 'prefetched')
    elseif flag == '2' and not waiting then
      -- Its worker says it still waits for a handler: marked from now on (the
      -- worker records its start, flag '1', before the handler runs).
      waiting = true
      redis.call('HSET', job, 'prefetched', token)
    end
    now = now or now_ms(meta)
    local deadline = now + lease_ms
    local claimed_at = to_count(redis.call('HGET', job, 'claimed_at'))
    if starts or (not claimed_at and not waiting) then
      -- (A claimed_at edited away by hand, on a started lease, counts from now:
      -- left unreadable, it would leave the lease uncapped for good.)
      claimed_at = now
      redis.call('HSET', job, 'claimed_at', now)
    end
    if claimed_at and not waiting then
      -- A handler that heartbeats forever still loses the job at the cap.
      deadline = math.min(deadline, claimed_at + cap_ms)
    end
    if deadline <= now then
      -- Past the cap: the lease is over and a reaper will take the job.
      out[#out + 1] = { 'CAPPED', deadline }
    else
      redis.call('HSET', job, 'lease_until', deadline)
      members[#members + 1] = deadline
      members[#members + 1] = id
      out[#out + 1] = { 'OK', deadline }
    end
  end
end
if #members > 0 then
  call_chunked('ZADD', active, members, 1000)
end
return out
