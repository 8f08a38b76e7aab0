-- push_pending(pending, K, job, id, priority): make a job claimable. An ungrouped job
-- of priority 0 goes to the tail of LIST K.ready (RPUSH: O(1), ~100 bytes a job less
-- than a sorted-set entry; docs/keys-and-rows.md). Any other goes into ZSET pending
-- under pending_score(priority, seq), seq the next FIFO number from the queue's meta
-- hash (K.meta; restarted and wrapped by pending_score's rule).
-- A row with a `group` field (fair groups) also goes into its group's ZSET
-- K.group_prefix .. <name> under that score, and into pending at PENDING_GROUPED + score,
-- above every ungrouped job, so the ungrouped ZPOPMIN path never takes it; the group
-- joins the rotation ZSET K.groups at the back (NX) unless it is held at
-- group_concurrency (HASH K.group_held). It also leaves a wake-up token on LIST
-- K.wake for blocked claimers (capped at 64).
-- KEYS  leaseq:{<queue>}:meta        HASH  fields seq (the FIFO sequence) and gseq (the rotation's next turn)
-- KEYS  leaseq:{<queue>}:ready       LIST  ungrouped ids of priority 0 ready to claim, FIFO
-- KEYS  leaseq:{<queue>}:groups      ZSET  fair groups with ready jobs, score = round-robin turn
-- KEYS  leaseq:{<queue>}:group_held  HASH  groups held back at group_concurrency
-- KEYS  leaseq:{<queue>}:wake        LIST  wake-up tokens for blocked claimers
-- ARGV  group_prefix, 'leaseq:{<queue>}:group:' (string): a fair group's ready ids are the ZSET group_prefix .. <name>
--!include lib/pending_score.lua
--!include lib/reserve_seq.lua
local function push_pending(pending, K, job, id, priority)
  local meta, wake = K.meta, K.wake
  redis.call('HSET', job, 'state', 'pending')
  local group = redis.call('HGET', job, 'group')
  if not group and priority == 0 then
    redis.call('RPUSH', K.ready, id)
  else
    local score = pending_score(priority, reserve_seq(K, 1) + 1)
    if group then
      redis.call('ZADD', K.group_prefix .. group, score, id)
      redis.call('ZADD', pending, PENDING_GROUPED + score, id)
      if not redis.call('HGET', K.group_held, group) then
        redis.call('ZADD', K.groups, 'NX', redis.call('HINCRBY', meta, 'gseq', 1), group)
      end
    else
      redis.call('ZADD', pending, score, id)
    end
  end
  if redis.call('LLEN', wake) < 64 then
    redis.call('RPUSH', wake, '1')
  end
end
