-- parked(K, id, after): whether job id is a keep-last successor still parked behind the
-- active holder of its uniqueness key (lib/unique_holder.lua: in K.scheduled at PARKED,
-- never due until free_unique rescores it as its holder finishes, so nothing may make it
-- due before). after is the row's field of that name (its holder's id; nil or false: none):
-- it stays parked while its holder's row still names it as unique_next. (A plain read of
-- the holder's row: the least-privilege ACL user has HGET, not ZSCORE.)
-- ARGV  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string): the holder's row
local PARKED = 9007199254740991 -- 2^53 - 1
local function parked(K, id, after)
  return after and redis.call('HGET', K.job_prefix .. after, 'unique_next') == id or false
end
