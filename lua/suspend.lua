-- suspend.lua: end a held lease's attempt asleep (sleep) or waiting for a signal (wait_for): no lease, no slot, refunded.
-- transition: active -> suspended; active -> pending (a wait whose signal is already kept)
-- clock: server TIME (never behind the queue's meta clock), for the wake time run_at
-- flags: none (it may grow a row: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- KEYS[2]  leaseq:{<queue>}:suspended  ZSET  ids asleep or waiting, score = run_at ms epoch (+inf: no end)
-- KEYS[3]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[4]  leaseq:{<queue>}:waiters    ZSET  '<signal key> <id>' of every job waiting for a signal, score 0
-- KEYS[5]  leaseq:{<queue>}:signals    HASH  kept signals: signal key -> payload
-- KEYS[6]  leaseq:{<queue>}:signal_ends  ZSET  kept signals' keys, score = kept until ms epoch
-- KEYS[7]  leaseq:{<queue>}:meta       HASH  counters, seq, clock
-- KEYS[8]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[9]  leaseq:{<queue>}:wake       LIST  wake-up tokens for blocked claimers
-- KEYS[10] leaseq:{<queue>}:ready      LIST  ungrouped ids of priority 0 ready to claim, FIFO (lib/take_ready.lua)
-- ARGV[1]  id, the job id (string)
-- ARGV[2]  token, the lease's attempts value (decimal string)
-- ARGV[3]  incarnation, the lease's row incarnation (decimal string)
-- ARGV[4]  fence, the lease's fence (its claiming call's random name, string)
-- ARGV[5]  name, the step's name (string): a sleep is recorded as field 'step:<name>' now, so the
--          run that resumes passes it at once; a wait is recorded when it ends (lib/end_wait.lua)
-- ARGV[6]  value, a sleep's record, encoded by the queue's codec (bytes; unused by a wait)
-- ARGV[7]  sleep_ms, how long until it wakes (integer ms >= 0), or -1: a wait with no timeout
-- ARGV[8]  key, the signal key a wait is for (string), or '' for a sleep
-- derives: leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix)
-- returns: {'OK', run_at} the ms epoch it wakes at (-1: only a signal wakes it);
--          {'OK', 0} when a kept signal resumed the wait at once (the job is pending)
-- errors: {'LOST', state, attempts, incarnation, fence} when the lease is not held under token, incarnation and fence;
--         {'DAMAGED', field, value} when max_attempts is not a count (the lease then runs out)
--!include lib/check_type.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/lease_check.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/push_pending.lua
--!include lib/refund_lease.lua
--!include lib/to_count.lua
--!include lib/wake_if_first.lua

local job, meta, id, key = K.job, K.meta, A.id, A.key
local refused, group = lease_check(job, A.token, A.incarnation, A.fence)
if refused then return refused end
-- Every index it may write is checked before the first write.
check_type(K.suspended, 'zset')
if key ~= '' then
  check_type(K.waiters, 'zset')
  check_type(K.signals, 'hash')
  check_type(K.signal_ends, 'zset')
  check_type(K.pending, 'zset')
  check_type(K.ready, 'list')
end
-- A sleep or a wait is not a failure: its attempt is refunded.
refused = refund_lease(K, job, id, group)
if refused then return refused end
local now = now_ms(meta)
local log = event_log(K.events, nil, meta)
local step = 'step:' .. A.name

local kept = false
if key ~= '' then
  local ends = tonumber(redis.call('ZSCORE', K.signal_ends, key))
  if ends and ends > now then
    kept = redis.call('HGET', K.signals, key)
  elseif ends then -- past its time: it goes now rather than at a later signal's sweep
    redis.call('ZREM', K.signal_ends, key)
    redis.call('HDEL', K.signals, key)
  end
end
if kept then
  -- Signalled before it waited: the kept payload is its record, and it runs again now.
  redis.call('HSET', job, step, kept)
  push_pending(K.pending, K, job, id, to_count(redis.call('HGET', job, 'priority')) or 0)
  log_event(log, 'active', 'pending', id, A.token)
  flush_events(log, now)
  return { 'OK', 0 }
end

local sleep_ms = tonumber(A.sleep_ms)
local run_at = sleep_ms >= 0 and now + sleep_ms or -1
redis.call('HSET', job, 'state', 'suspended')
if key == '' then
  redis.call('HSET', job, step, A.value)
else
  redis.call('HSET', job, 'wait_key', key, 'wait_step', A.name)
  redis.call('ZADD', K.waiters, 0, key .. ' ' .. id)
end
if run_at >= 0 then
  redis.call('HSET', job, 'run_at', run_at)
  redis.call('ZADD', K.suspended, run_at, id)
  -- An idle claimer planned its sleep before this wake time existed: a short
  -- sleep would otherwise last until its idle cap (seconds).
  wake_if_first(K.suspended, K.wake, run_at)
else
  redis.call('ZADD', K.suspended, '+inf', id)
end
log_event(log, 'active', 'suspended', id, A.token)
flush_events(log, now)
return { 'OK', run_at }
