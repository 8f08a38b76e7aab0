-- promote_due(scheduled, pending, meta, wake, job_prefix, now, limit):
-- move at most limit scheduled jobs whose time has come (score <= now) to
-- pending. Needs push_pending and to_count. Returns how many it moved.
local function promote_due(scheduled, pending, meta, wake, job_prefix, now, limit)
  local ids = redis.call('ZRANGEBYSCORE', scheduled, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(ids) do
    redis.call('ZREM', scheduled, id)
    local job = job_prefix .. id
    local row = redis.call('HMGET', job, 'state', 'priority')
    -- The row is the truth: an index entry whose row is gone or moved on
    -- is simply dropped.
    if row[1] == 'scheduled' then
      redis.call('HDEL', job, 'run_at')
      push_pending(pending, meta, wake, job, id, to_count(row[2]) or 0)
    end
  end
  return #ids
end
