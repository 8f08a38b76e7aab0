-- dead_letter(job, dead, meta, id, now, err): park a job in the dead set.
-- The caller has already removed the id from the index it came from. Dead
-- rows are kept until an operator retries or purges them: never trimmed.
-- Needs bump_counter.
local function dead_letter(job, dead, meta, id, now, err)
  redis.call('HSET', job, 'state', 'dead', 'finished_at', now, 'last_error', err)
  redis.call('HDEL', job, 'lease_until', 'run_at')
  redis.call('ZADD', dead, now, id)
  bump_counter(meta, 'dead', 1, now)
  signal_done(meta, id) -- lib/signal_done.lua, included before this file
end
