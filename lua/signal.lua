-- signal.lua: resume up to limit jobs waiting for a signal key (wait_for), its payload their record; keep it for later waiters.
-- transition: suspended -> pending
-- clock: server TIME (never behind the queue's meta clock), for how long the signal is kept
-- flags: none (it keeps a payload: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:waiters    ZSET  '<signal key> <id>' of every job waiting for a signal, score 0
-- KEYS[2]  leaseq:{<queue>}:signals    HASH  kept signals: signal key -> payload
-- KEYS[3]  leaseq:{<queue>}:signal_ends  ZSET  kept signals' keys, score = kept until ms epoch
-- KEYS[4]  leaseq:{<queue>}:suspended  ZSET  ids asleep or waiting, score = run_at ms epoch (+inf: no end)
-- KEYS[5]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[6]  leaseq:{<queue>}:meta       HASH  counters, seq, clock
-- KEYS[7]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[8]  leaseq:{<queue>}:ready      LIST  ungrouped ids of priority 0 ready to claim, FIFO (lib/take_ready.lua)
-- ARGV[1]  key, the signal key (string)
-- ARGV[2]  payload, the signal's payload, encoded by the queue's codec (bytes)
-- ARGV[3]  keep_ms, how long later waiters still find it (integer ms >= 0; 0 keeps nothing and
--          withdraws a signal kept before; -1: a later call of the same signal, which keeps as is)
-- ARGV[4]  limit, the most waiters to resume in this call (integer >= 1); it also stops once it
--          has worked its time budget (lib/over_budget.lua), past its first waiter, the rest left for the next call
-- ARGV[5]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the waiting jobs' rows (job_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix)
-- returns: {'OK', resumed, more} with more = 1 while waiters of the key are left for the next call
-- errors: none (a waiter whose row is gone or moved on is dropped from the index)
--!include lib/check_type.lua
--!include lib/elapsed_us.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/now_ms.lua
--!include lib/over_budget.lua
--!include lib/read_row.lua
--!include lib/resume_row.lua

local started = elapsed_us()
local key, payload, limit = A.key, A.payload, tonumber(A.limit)
check_type(K.waiters, 'zset')
check_type(K.signals, 'hash')
check_type(K.signal_ends, 'zset')
check_type(K.suspended, 'zset')
check_type(K.pending, 'zset')
check_type(K.ready, 'list')
local now = now_ms(K.meta)
-- Kept signals that are past their time go first, a bounded few per call: each
-- call adds at most one, so the index never outgrows what is kept.
for _, old in ipairs(redis.call('ZRANGEBYSCORE', K.signal_ends, '-inf', now, 'LIMIT', 0, 16)) do
  redis.call('ZREM', K.signal_ends, old)
  redis.call('HDEL', K.signals, old)
end
-- The newest signal of a key is the one kept: keep_ms 0 withdraws an older one.
-- A later page of the same signal (keep_ms -1) leaves it as its first page set it.
if tonumber(A.keep_ms) > 0 then
  redis.call('HSET', K.signals, key, payload)
  redis.call('ZADD', K.signal_ends, now + tonumber(A.keep_ms), key)
elseif tonumber(A.keep_ms) == 0 then
  redis.call('HDEL', K.signals, key)
  redis.call('ZREM', K.signal_ends, key)
end

-- Every waiter of key is a member '<key> <id>': a key has no space, so they
-- sort together, between '<key> ' and '<key>!'. Read a few at a time: a
-- call that stops at its time budget has fetched little it does not use.
local log = event_log(K.events, nil, K.meta)
local seen, resumed, more = 0, 0, 1
while more == 1 and seen < limit do
  local members = redis.call('ZRANGEBYLEX', K.waiters, '[' .. key .. ' ', '(' .. key .. '!',
    'LIMIT', 0, math.min(8, limit - seen))
  if #members < math.min(8, limit - seen) then more = 0 end
  for _, member in ipairs(members) do
    -- Checked before each waiter, not each batch: a big payload makes one
    -- resume cost more than a batch's budget. What is left stays indexed.
    if seen > 0 and over_budget(started) then
      more = 1
      break
    end
    local id = string.sub(member, #key + 2)
    local job = A.job_prefix .. id
    local row = read_row(job, 'state', 'wait_key', 'wait_step', 'priority', 'attempts')
    -- The row is the truth: a member whose job was deleted, cancelled or woke
    -- by its timeout is only dropped.
    if row and row[1] == 'suspended' and row[2] == key then
      resume_row(K, job, id, 'suspended', row[4], row[5], log, payload, key, row[3])
      resumed = resumed + 1
    else
      redis.call('ZREM', K.waiters, member)
    end
    seen = seen + 1
  end
  if over_budget(started) then break end
end
flush_events(log, now)
return { 'OK', resumed, more }
