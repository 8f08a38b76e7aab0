-- unready(K, id, state): take a job out of the ready indexes as it leaves state (its
-- state until now, by cancel, delete, purge or a start-by deadline): ZREM from ZSET
-- K.pending. A pending job that was not there is an entry of LIST K.ready, which is
-- never searched (LREM is O(n) on a million-job queue): unless it is the list's head,
-- the entry stays, counted in meta field ready_stale, until a claim pops it and drops
-- it (lib/take_ready.lua).
-- KEYS  leaseq:{<queue>}:pending  ZSET  ids ready to claim
-- KEYS  leaseq:{<queue>}:ready    LIST  ungrouped ids of priority 0 ready to claim, FIFO
--!include lib/ready_count.lua
local function unready(K, id, state)
  if redis.call('ZREM', K.pending, id) == 1 or state ~= 'pending' then return end
  if redis.call('LRANGE', K.ready, 0, 0)[1] == id then
    -- At the head, where a bulk cancel walking pending in order finds each job: it
    -- leaves at once. (An entry of an earlier row under this id may be that head: then
    -- it leaves instead, and this job's own entry is the stale one; the count holds.)
    redis.call('LPOP', K.ready)
    ready_count(K, 'ready_popped', 1)
  else
    ready_count(K, 'ready_stale', 1)
  end
end
