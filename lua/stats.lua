-- stats.lua: one consistent snapshot of a queue's counts, read-only.
-- transition: none (reads only)
-- clock: server TIME (never behind the queue's meta clock), to count live succeeded rows and expired leases
-- flags: no-writes (it only reads)
-- KEYS[1]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[2]  leaseq:{<queue>}:scheduled  ZSET  ids waiting, score = due ms epoch
-- KEYS[3]  leaseq:{<queue>}:active     ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[4]  leaseq:{<queue>}:succeeded  ZSET  succeeded ids, score = ms epoch the row expires
-- KEYS[5]  leaseq:{<queue>}:dead       ZSET  dead ids, score = died ms epoch
-- KEYS[6]  leaseq:{<queue>}:cancelled  ZSET  cancelled ids, score = ms epoch the row expires
-- KEYS[7]  leaseq:{<queue>}:meta       HASH  counters, clock
-- KEYS[8]  leaseq:{<queue>}:limits     HASH  global limits: concurrency, rate, per_ms
-- KEYS[9]  leaseq:{<queue>}:claims     ZSET  claim times of the rate span, score = ms epoch
-- KEYS[10]  leaseq:{<queue>}:groups       ZSET  fair groups with ready jobs, score = round-robin turn
-- KEYS[11]  leaseq:{<queue>}:group_held   HASH  groups held back at group_concurrency
-- KEYS[12]  leaseq:{<queue>}:waiting    ZSET  ids waiting for parents
-- ARGV[1]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  soon_ms, the window for "leases expiring soon" (integer ms >= 0)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the oldest pending job's row (job_prefix)
-- returns: flat array: now_ms, pending, scheduled, active, succeeded, dead, cancelled,
--          expired leases, leases expiring within soon_ms, oldest pending enqueued_at
--          (ms epoch, -1 if none), next scheduled due (ms epoch, -1 if none),
--          concurrency limit, rate limit, its per_ms, claims in the last per_ms (each -1 if none),
--          group_concurrency (-1 if none), groups in the rotation, groups held at group_concurrency,
--          jobs waiting for parents, then the meta hash as field, value pairs
-- errors: none
--!include lib/now_ms.lua
--!include lib/to_count.lua

local pending, scheduled, active, succeeded, dead, cancelled, meta =
  K.pending, K.scheduled, K.active, K.succeeded, K.dead, K.cancelled, K.meta
local now = now_ms(meta, true)
local oldest = -1
-- The lowest score is the highest priority, not the oldest job; across
-- priorities the oldest is not indexed, so this reads the head's row only.
local head = redis.call('ZRANGE', pending, 0, 0)
if #head > 0 then
  oldest = tonumber(redis.call('HGET', A.job_prefix .. head[1], 'enqueued_at') or -1) or -1
end
local due = -1
local nxt = redis.call('ZRANGE', scheduled, 0, 0, 'WITHSCORES')
if #nxt > 0 then due = tonumber(nxt[2]) end
local out = {
  now,
  redis.call('ZCARD', pending),
  redis.call('ZCARD', scheduled),
  redis.call('ZCARD', active),
  redis.call('ZCOUNT', succeeded, '(' .. now, '+inf'),
  redis.call('ZCARD', dead),
  redis.call('ZCOUNT', cancelled, '(' .. now, '+inf'),
  redis.call('ZCOUNT', active, '-inf', now),
  redis.call('ZCOUNT', active, '(' .. now, now + tonumber(A.soon_ms)),
  oldest,
  due,
}
-- The global limits and how close the queue is to them.
local lim = redis.call('HMGET', K.limits, 'concurrency', 'rate', 'per_ms')
-- As claim reads them (lib/apply_limits.lua): a field that is not decimal digits is no limit.
-- A rate counts only with its span, and the span only with a rate (as claim reads them).
local rate, per = to_count(lim[2]), to_count(lim[3])
if per == 0 or not rate then per = nil end
if not per then rate = nil end
out[#out + 1] = to_count(lim[1]) or -1
out[#out + 1] = rate or -1
out[#out + 1] = per or -1
out[#out + 1] = per and redis.call('ZCOUNT', K.claims, '(' .. (now - per), '+inf') or -1
-- Fair groups: the per-group limit, groups in the rotation, groups held at it.
out[#out + 1] = to_count(redis.call('HGET', K.limits, 'group_concurrency')) or -1
out[#out + 1] = redis.call('ZCARD', K.groups)
out[#out + 1] = #redis.call('HGETALL', K.group_held) / 2 -- no SCARD/HLEN: see limits.lua
out[#out + 1] = redis.call('ZCARD', K.waiting)
local m = redis.call('HGETALL', meta)
for i = 1, #m do out[#out + 1] = m[i] end
return out
