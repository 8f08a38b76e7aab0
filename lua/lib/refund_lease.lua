-- refund_lease(K, job, id, group): end a held lease without spending its attempt (a release,
-- a sleep, a wait): attempts never goes down (it is the fencing token), so max_attempts grows
-- by one instead; the lease fields go, the id leaves active, a grouped row's slot is freed
-- (lib/group_done.lua; group as lease_check returned it), and a claimer held back at the
-- queue's concurrency limit is woken for the freed slot (lib/wake_held.lua). The row's new state is the
-- caller's to write. Returns nil, or {'DAMAGED', 'max_attempts', value} with nothing written
-- when max_attempts is not a count (the lease then runs out and is reaped).
-- KEYS  leaseq:{<queue>}:active  ZSET  ids under lease, score = lease_until ms epoch
--!include lib/group_done.lua
--!include lib/to_count.lua
--!include lib/wake_held.lua
local function refund_lease(K, job, id, group)
  local max_attempts = redis.call('HGET', job, 'max_attempts')
  if not to_count(max_attempts) then
    return { 'DAMAGED', 'max_attempts', max_attempts or '' }
  end
  redis.call('HSET', job, 'max_attempts', to_count(max_attempts) + 1)
  redis.call('HDEL', job, 'lease_until', 'prefetched')
  redis.call('ZREM', K.active, id)
  group_done(K, job, group)
  wake_held(K)
  return nil
end
