-- cancel_child(K, batch, kid, k, why, now, log): a waiting child (row read as k:
-- state, on_parent_failure, delay, priority, failed_parents, parents_left, group,
-- depends_on, as settle_children reads it) will never run: cancelled with
-- last_error why, kept until purged (its id goes on batch.dropped, scored
-- 10^15 + now, and on batch.gone, for the caller's batched index writes), its
-- own parents unpinned (unpin_parent), and its waiting children on batch.work
-- to settle as a cancelled parent's. Returns how many parents it unpinned: a
-- child of many parents costs the settle budget as much as many children.
-- ARGV  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string), for the child's row
--!include lib/log_event.lua
--!include lib/unpin_parent.lua
local function cancel_child(K, batch, kid, k, why, now, log)
  local job = K.job_prefix .. kid
  redis.call('HSET', job, 'state', 'cancelled', 'finished_at', now, 'last_error', why)
  redis.call('HDEL', job, 'delay')
  batch.gone[#batch.gone + 1] = kid
  batch.dropped[#batch.dropped + 1] = 1000000000000000 + now
  batch.dropped[#batch.dropped + 1] = kid
  log_event(log, 'waiting', 'cancelled', kid, 0)
  local unpinned = 0
  if k[8] then
    for parent in string.gmatch(k[8], '%S+') do
      unpin_parent(K, parent, { kid }, now)
      unpinned = unpinned + 1
    end
  end
  batch.work[#batch.work + 1] = { kid, 'cancelled' }
  return unpinned
end
