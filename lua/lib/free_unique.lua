-- free_unique(K, job, id, now, fields): job id is finishing (succeeded, dead, cancelled,
-- deleted, purged): free the uniqueness key its row holds (field unique_key), so
-- the next enqueue with that key creates a job. K.unique is the queue's HASH
-- 'leaseq:{<queue>}:unique' (key -> '<holder id>' or '<holder id> <window end ms>');
-- the entry goes only while it still names this job and no throttle window of it
-- is open (a window outlives its job: enqueue trims ended ones). A successor
-- parked behind this job (row field unique_next: a keep-last duplicate enqueued
-- while this job ran) becomes due now in K.scheduled, with a wake-up token on
-- K.wake (capped at 64, as push_pending does). Call it while the row still exists.
-- fields: the row's { unique_key, unique_next } when the caller read them already
-- (lease_check does), else nil: they are read here.
-- KEYS  leaseq:{<queue>}:unique     HASH  uniqueness key -> '<holder id>' or '<holder id> <window end ms>'
-- KEYS  leaseq:{<queue>}:scheduled  ZSET  ids waiting for a time: a parked successor becomes due there
-- KEYS  leaseq:{<queue>}:wake       LIST  wake-up tokens for blocked claimers
local function free_unique(K, job, id, now, fields)
  local row = fields or redis.pcall('HMGET', job, 'unique_key', 'unique_next')
  if row['err'] or not row[1] then return end
  local held = redis.call('HGET', K.unique, row[1])
  if held then
    local holder, ends = string.match(held, '^(%S+) ?(%d*)$')
    if holder == id and (ends == '' or tonumber(ends) <= now) then
      redis.call('HDEL', K.unique, row[1])
    end
  end
  if row[2] then
    redis.call('HDEL', job, 'unique_next')
    if redis.call('ZADD', K.scheduled, 'XX', 'CH', now, row[2]) == 1
        and redis.call('LLEN', K.wake) < 64 then
      redis.call('RPUSH', K.wake, '1')
    end
  end
end
