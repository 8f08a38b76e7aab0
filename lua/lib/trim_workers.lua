-- trim_workers(index, now): drop from the worker index the ids whose rows
-- expired (score <= now), at most 100 per call (ZRANGEBYSCORE + ZREM: the
-- commands the least-privilege ACL already allows).
local function trim_workers(index, now)
  local gone = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, 100)
  if #gone > 0 then redis.call('ZREM', index, (table.unpack or unpack)(gone)) end
end
