-- parked(K, id): whether job id is a keep-last successor parked behind the active holder
-- of its uniqueness key (lib/unique_holder.lua): in K.scheduled at PARKED, never due until
-- free_unique rescores it as its holder finishes, so nothing may make it due before.
-- KEYS  leaseq:{<queue>}:scheduled  ZSET  ids waiting for a time (parked successors at PARKED)
local PARKED = 9007199254740991 -- 2^53 - 1
local function parked(K, id)
  return tonumber(redis.call('ZSCORE', K.scheduled, id)) == PARKED
end
