-- stats.lua: one consistent snapshot of a queue's counts, read-only.
-- transition: none (reads only)
-- clock: server TIME (never behind the queue's meta clock), to count live succeeded rows and expired leases
-- flags: no-writes (it only reads)
-- KEYS[1]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[2]  leaseq:{<queue>}:scheduled  ZSET  ids waiting, score = due ms epoch
-- KEYS[3]  leaseq:{<queue>}:active     ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[4]  leaseq:{<queue>}:meta       HASH  counters, clock
-- KEYS[5]  leaseq:{<queue>}:limits     HASH  global limits: concurrency, rate, per_ms
-- KEYS[6]  leaseq:{<queue>}:claims     ZSET  claim times of the rate span, score = ms epoch
-- KEYS[7]  leaseq:{<queue>}:groups       ZSET  fair groups with ready jobs, score = round-robin turn
-- KEYS[8]  leaseq:{<queue>}:group_held   HASH  groups held back at group_concurrency
-- KEYS[9]  leaseq:{<queue>}:costs        ZSET  the queue's cost window (lib/cost_window.lua)
-- KEYS[10] leaseq:{<queue>}:ready        LIST  ungrouped ids of priority 0 ready to claim, FIFO
-- ARGV[1]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  soon_ms, the window for "leases expiring soon" (integer ms >= 0)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the oldest pending job's row (job_prefix)
-- returns: two arrays of field, value pairs: the snapshot's fields by name (now_ms; one
--          count per state, named as the state (lib/state_indexes.lua); expired, expiring_soon
--          (leases within soon_ms); overdue (scheduled jobs already due); oldest_pending_at (enqueued_at of the head of pending,
--          ms epoch), next_due_at (ms epoch); concurrency, rate, per_ms, recent_claims,
--          group_concurrency; groups_ready, groups_held; cost_rate, cost_per_ms, recent_cost
--          (decimal text: the cost limit, and the cost claimed in its last span);
--          -1 where there is none), then
--          the meta hash as its HGETALL gives it
-- errors: none
--!include lib/cost_in_window.lua
--!include lib/cost_limit.lua
--!include lib/now_ms.lua
--!include lib/state_indexes.lua
--!include lib/to_count.lua

local meta = K.meta
local now = now_ms(meta, true)
local out = { 'now_ms', now }
local function put(name, value)
  out[#out + 1] = name
  out[#out + 1] = value
end
-- Pending jobs wait in LIST ready too, less its stale entries (lib/unready.lua).
local listed = redis.call('LLEN', K.ready)
local stale = to_count(redis.call('HGET', meta, 'ready_stale')) or 0
for _, index in ipairs(state_indexes(K)) do
  -- A row past its expiry is gone (or about to be): not counted.
  local n = index.expiring and redis.call('ZCOUNT', index.key, '(' .. now, '+inf')
    or redis.call('ZCARD', index.key)
  if index.state == 'pending' then n = n + math.max(0, listed - stale) end
  put(index.state, n)
end
put('expired', redis.call('ZCOUNT', K.active, '-inf', now))
put('expiring_soon', redis.call('ZCOUNT', K.active, '(' .. now, now + tonumber(A.soon_ms)))
-- Scheduled jobs already due, not yet promoted (the next claim or reap does):
-- with pending, the backlog an autoscaler reads.
put('overdue', redis.call('ZCOUNT', K.scheduled, '-inf', now))
local oldest = -1
-- The lowest score is the highest priority, not the oldest job; across
-- priorities the oldest is not indexed, so this reads the head's row only.
-- LIST ready's head runs first (a stale entry there is a job gone: the next are read, 32 at
-- most, a bounded read; past them the pending set's head answers).
local head = redis.call('LRANGE', K.ready, 0, 31)
for _, id in ipairs(redis.call('ZRANGE', K.pending, 0, 0)) do head[#head + 1] = id end
for _, id in ipairs(head) do
  local row = redis.pcall('HMGET', A.job_prefix .. id, 'state', 'enqueued_at')
  if not row['err'] and row[1] == 'pending' then
    oldest = tonumber(row[2] or -1) or -1
    break
  end
end
put('oldest_pending_at', oldest)
local nxt = redis.call('ZRANGE', K.scheduled, 0, 0, 'WITHSCORES')
put('next_due_at', #nxt > 0 and tonumber(nxt[2]) or -1)
-- The global limits and how close the queue is to them.
local lim = redis.call('HMGET', K.limits, 'concurrency', 'rate', 'per_ms')
-- As claim reads them (lib/apply_limits.lua): a field that is not decimal digits is no limit.
-- A rate counts only with its span, and the span only with a rate (as claim reads them).
local rate, per = to_count(lim[2]), to_count(lim[3])
if per == 0 or not rate then per = nil end
if not per then rate = nil end
put('concurrency', to_count(lim[1]) or -1)
put('rate', rate or -1)
put('per_ms', per or -1)
put('recent_claims', per and redis.call('ZCOUNT', K.claims, '(' .. (now - per), '+inf') or -1)
-- Fair groups: the per-group limit, groups in the rotation, groups held at it.
put('group_concurrency', to_count(redis.call('HGET', K.limits, 'group_concurrency')) or -1)
put('groups_ready', redis.call('ZCARD', K.groups))
put('groups_held', #redis.call('HGETALL', K.group_held) / 2) -- no SCARD/HLEN: see limits.lua
-- The cost limit (as claim reads it: lib/cost_gate.lua) and the cost in its window.
local cost = redis.call('HMGET', K.limits, 'cost_rate', 'cost_per_ms')
local budget, cost_per = cost_limit(cost[1], cost[2])
put('cost_rate', budget and string.format('%.15g', budget) or -1)
put('cost_per_ms', cost_per or -1)
put('recent_cost', cost_per
  and string.format('%.15g', cost_in_window(K.costs, budget, cost_per, now)) or -1)
return { out, redis.call('HGETALL', meta) }
