-- extend.lua: push a held lease's deadline to now + lease_ms, capped at claimed_at + cap_ms.
-- transition: active -> active (a heartbeat)
-- clock: server TIME (never behind the queue's meta clock), for the new deadline
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- KEYS[2]  leaseq:{<queue>}:active     ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[3]  leaseq:{<queue>}:meta       HASH  the queue's clock floor (field clock)
-- ARGV[1]  id, the job id (string)
-- ARGV[2]  token, the lease's attempts value (decimal string)
-- ARGV[3]  lease_ms, the new lease length from now (integer ms >= 1)
-- ARGV[4]  cap_ms, the most total lease time one claim may hold, from claimed_at (integer ms >= 1)
-- derives: nothing
-- returns: {'OK', lease_until ms epoch}
-- errors: {'LOST', state, attempts} when the lease is not held under token;
--         {'CAPPED', deadline ms epoch} when the cap leaves no time at all (nothing written)
--!include lib/now_ms.lua
--!include lib/to_count.lua
--!include lib/lease_check.lua

local job, active, meta = KEYS[1], KEYS[2], KEYS[3]
local refused = lease_check(job, ARGV[2])
if refused then return refused end

local now = now_ms(meta)
local deadline = now + tonumber(ARGV[3])
local claimed_at = to_count(redis.call('HGET', job, 'claimed_at'))
if claimed_at then
  -- A handler that heartbeats forever still loses the job at the cap.
  deadline = math.min(deadline, claimed_at + tonumber(ARGV[4]))
  if deadline <= now then
    -- Past the cap: the lease is over and a reaper will take the job.
    return { 'CAPPED', deadline }
  end
end
redis.call('HSET', job, 'lease_until', deadline)
redis.call('ZADD', active, deadline, ARGV[1])
return { 'OK', deadline }
