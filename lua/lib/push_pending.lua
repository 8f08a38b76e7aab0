-- push_pending(pending, meta, wake, job, id, priority): make a job claimable.
-- The pending score is priority * 2^33 + seq, where seq comes from the queue's
-- meta hash, so ZPOPMIN yields the lowest priority first and FIFO within one.
-- Both terms stay below 2^53, so the score is an exact integer in a double.
-- seq restarts when the pending set is empty and has grown past 2^32, and
-- wraps at 2^33 (only FIFO order could suffer then, never a job).
-- It also leaves a wake-up token for blocked claimers (capped at 64).
local function push_pending(pending, meta, wake, job, id, priority)
  local seq = redis.call('HINCRBY', meta, 'seq', 1)
  if (seq > 4294967296 and redis.call('ZCARD', pending) == 0) or seq >= 8589934592 then
    redis.call('HSET', meta, 'seq', 1)
    seq = 1
  end
  redis.call('HSET', job, 'state', 'pending')
  redis.call('ZADD', pending, priority * 8589934592 + seq, id)
  if redis.call('LLEN', wake) < 64 then
    redis.call('RPUSH', wake, '1')
  end
end
