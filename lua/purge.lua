-- purge.lua: delete up to limit jobs of one state, rows and index entries.
-- transition: pending | scheduled | succeeded | dead | cancelled -> (deleted)
-- clock: none
-- KEYS[1]  leaseq:{<queue>}:<state>    ZSET  the index of that state
-- ARGV[1]  job key prefix, 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  state, the state being purged (string; never 'active')
-- ARGV[3]  limit, the most ids to delete in this call (integer >= 1)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the job rows
-- returns: {deleted, remaining in the index}
-- errors: none
local index = KEYS[1]
local job_prefix, state = ARGV[1], ARGV[2]
local ids = redis.call('ZRANGE', index, 0, tonumber(ARGV[3]) - 1)
local deleted = 0
for _, id in ipairs(ids) do
  local job = job_prefix .. id
  -- Only delete a row that really is in this state; an index entry that
  -- drifted is just dropped, so a purge never takes a job it did not mean to.
  if redis.call('HGET', job, 'state') == state then
    redis.call('DEL', job)
    deleted = deleted + 1
  end
  redis.call('ZREM', index, id)
end
return { deleted, redis.call('ZCARD', index) }
