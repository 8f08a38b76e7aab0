-- check_ready(K, soft): stop the call with a WRONGTYPE error naming the key (DamagedKey to
-- the caller) when LIST ready or ZSET pending holds another type; with soft, return that
-- message instead (nil: both fine). A script that may make a job ready calls it before its
-- first write: Redis keeps what a script wrote before an error, so an index damaged by hand
-- met half way would leave a row moved to pending and in no index.
-- LLEN and ZCARD, not TYPE: the least-privilege ACL (docs/reliability.md) has them.
-- KEYS  leaseq:{<queue>}:pending  ZSET  ids ready to claim (priorities, fair groups)
-- KEYS  leaseq:{<queue>}:ready    LIST  ungrouped ids of priority 0 ready to claim, FIFO
local function check_ready(K, soft)
  local why = nil
  if type(redis.pcall('LLEN', K.ready)) == 'table' then
    why = string.format('WRONGTYPE %s is not a list (damaged by hand?)', K.ready)
  elseif type(redis.pcall('ZCARD', K.pending)) == 'table' then
    why = string.format('WRONGTYPE %s is not a sorted set (damaged by hand?)', K.pending)
  end
  if why and not soft then error(why) end
  return why
end
