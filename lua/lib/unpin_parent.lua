-- unpin_parent(K, parent, kids, now): kids (a list of ids), children of parent, finished
-- (or were deleted): #kids fewer pins on parent's row (field children), and they
-- leave the SET K.graph_prefix .. parent of the children waiting for it. When the
-- last pin goes, a finished row that was pinned at its finish or later (field
-- keep: the retention it was due, ms; 0 = delete now, -1 = until purged) gets
-- that retention now: deleted, or expiring keep ms from now (index score
-- now + keep in K.succeeded or K.cancelled). A parent row that is gone or not
-- a hash is left alone.
-- KEYS  leaseq:{<queue>}:succeeded  ZSET  succeeded ids, score = ms epoch the row expires
-- KEYS  leaseq:{<queue>}:cancelled  ZSET  cancelled ids, score = ms epoch the row expires
-- ARGV  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string), for the parent's row
-- ARGV  graph_prefix, 'leaseq:{<queue>}:graph:' (string): a job's children still waiting for it are the SET graph_prefix .. <id>
local function unpin_parent(K, parent, kids, now)
  -- Out of the parent's set too (even a finished parent's: the children it
  -- has not settled yet wait there), so a child deleted and made again under
  -- the same id is never settled by its old parent.
  local unpack_ = table.unpack or unpack
  for i = 1, #kids, 1000 do -- Lua 5.1 unpacks about 8000 values at most
    redis.pcall('SREM', K.graph_prefix .. parent, unpack_(kids, i, math.min(i + 999, #kids)))
  end
  local job = K.job_prefix .. parent
  local row = redis.pcall('HMGET', job, 'state', 'children', 'keep')
  if row['err'] or not row[1] then return end
  local left = tonumber(row[2])
  if not left then return end
  if left > #kids then
    redis.call('HINCRBY', job, 'children', -#kids)
    return
  end
  redis.call('HDEL', job, 'children', 'keep')
  local keep = tonumber(row[3])
  local index = (row[1] == 'succeeded' and K.succeeded) or (row[1] == 'cancelled' and K.cancelled)
  if not keep or not index then return end
  if keep == 0 then
    redis.call('DEL', job)
    redis.call('ZREM', index, parent)
  elseif keep > 0 then
    redis.call('PEXPIRE', job, keep)
    redis.call('ZADD', index, now + keep, parent)
  end
end
