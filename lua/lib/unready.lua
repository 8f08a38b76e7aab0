-- unready(K, id, state): take a job out of the ready indexes as it leaves state (its
-- state until now, by cancel, delete, purge or a start-by deadline): ZREM from ZSET
-- K.pending. A pending job that was not there is an entry of LIST K.ready, which is
-- never searched (LREM is O(n) on a million-job queue): the entry stays, counted
-- in meta field ready_stale, until a claim pops it and drops it (lib/take_ready.lua).
-- KEYS  leaseq:{<queue>}:pending  ZSET  ids ready to claim
--!include lib/ready_count.lua
local function unready(K, id, state)
  if redis.call('ZREM', K.pending, id) == 0 and state == 'pending' then
    ready_count(K, 'ready_stale', 1)
  end
end
