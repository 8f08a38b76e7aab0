-- check_ready(K): stop the call with a WRONGTYPE error (DamagedKey to the caller) when LIST
-- ready or ZSET pending holds another type, before the script's first write. A script that
-- may make a job ready calls it first: Redis keeps what a script wrote before an error, so an
-- index damaged by hand met half way would leave a row moved to pending and in no index.
-- LLEN and ZCARD, not TYPE: the least-privilege ACL (docs/reliability.md) has them.
-- KEYS  leaseq:{<queue>}:pending  ZSET  ids ready to claim (priorities, fair groups)
-- KEYS  leaseq:{<queue>}:ready    LIST  ungrouped ids of priority 0 ready to claim, FIFO
local function check_ready(K)
  redis.call('LLEN', K.ready)
  redis.call('ZCARD', K.pending)
end
