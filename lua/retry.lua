-- retry.lua: give a dead job more attempts and make it pending again.
-- transition: dead -> pending
-- clock: none
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- KEYS[2]  leaseq:{<queue>}:dead       ZSET  dead ids, score = died ms epoch
-- KEYS[3]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[4]  leaseq:{<queue>}:meta       HASH  counters, seq
-- KEYS[5]  leaseq:{<queue>}:wake       LIST  wake-up tokens
-- ARGV[1]  id, the job id (string)
-- ARGV[2]  extra, attempts to grant on top of those already used (integer >= 1)
-- derives: nothing
-- returns: {'OK', new max_attempts}
-- errors: {'GONE'} for an unknown id; {'STATE', state} when the job is not dead (both drop
--         a stale dead-set entry); {'DAMAGED', field, value} when state or attempts is damaged
--!include lib/to_count.lua
--!include lib/push_pending.lua

local job, dead, pending, meta, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
local row = redis.call('HMGET', job, 'state', 'attempts', 'priority')
local moved = { pending = true, scheduled = true, active = true, succeeded = true,
                cancelled = true }
if row[1] ~= 'dead' then
  if row[1] and not moved[row[1]] or not row[1] and redis.call('EXISTS', job) == 1 then
    -- A hand-damaged state: keep the entry, so the row stays findable.
    return { 'DAMAGED', 'state', row[1] or '' }
  end
  -- The row is gone or lives in another index: this dead entry is stale,
  -- and dropping it lets retry-all step past it.
  redis.call('ZREM', dead, id)
  if not row[1] then return { 'GONE' } end
  return { 'STATE', row[1] }
end
local attempts = to_count(row[2])
if not attempts then return { 'DAMAGED', 'attempts', row[2] or '' } end

-- attempts is the fencing token and never goes down: a zombie from an old
-- attempt must not match a new lease. So the bound moves up instead.
local max_attempts = attempts + tonumber(ARGV[2])
redis.call('HSET', job, 'max_attempts', max_attempts)
redis.call('HDEL', job, 'finished_at')
redis.call('ZREM', dead, id)
redis.call('HINCRBY', meta, 'retried', 1)
push_pending(pending, meta, wake, job, id, to_count(row[3]) or 0)
return { 'OK', max_attempts }
