-- pin_parent(K, parent, state, n, now): job parent (its row in state) has n more
-- children that have not finished: add n to its row field children. While that
-- count is above 0 the row is pinned -- no retention (keep_succeeded, keep_count,
-- expiry) removes it, so its children can read its result (docs/workflows.md).
-- A finished row that retention would remove (succeeded, cancelled: ZSET
-- K.succeeded, K.cancelled) and that was not pinned yet stops expiring now: its
-- remaining time goes into field keep (ms; -1 = kept until purged) for
-- unpin_parent, and its index score becomes 10^15 + now (kept: trim_finished
-- never reaches it; trim_count steps over a pinned row).
-- KEYS  leaseq:{<queue>}:succeeded  ZSET  succeeded ids, score = ms epoch the row expires (10^15 + finished: kept)
-- KEYS  leaseq:{<queue>}:cancelled  ZSET  cancelled ids, scored as succeeded
-- ARGV  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string), for the parent's row
local function pin_parent(K, parent, state, n, now)
  local job = K.job_prefix .. parent
  if redis.call('HINCRBY', job, 'children', n) ~= n then return end
  local index = (state == 'succeeded' and K.succeeded) or (state == 'cancelled' and K.cancelled)
  if not index then return end
  local ttl = redis.call('PTTL', job)
  redis.call('HSET', job, 'keep', ttl >= 0 and ttl or -1)
  redis.call('PERSIST', job)
  redis.call('ZADD', index, 1000000000000000 + now, parent)
end
