-- wake_held(K): a lease ended under a concurrency limit: if a claim was held back at the limit
-- (meta 'limit_held'), clear the mark and leave one wake-up token (64 at most) so a blocked
-- claimer takes the freed slot now rather than at its next timeout.
-- KEYS  leaseq:{<queue>}:meta  HASH  field limit_held, set by a claim the limit held back
-- KEYS  leaseq:{<queue>}:wake  LIST  wake-up tokens for blocked claimers
local function wake_held(K)
  if redis.call('HDEL', K.meta, 'limit_held') == 1 and redis.call('LLEN', K.wake) < 64 then
    redis.call('RPUSH', K.wake, '1')
  end
end
