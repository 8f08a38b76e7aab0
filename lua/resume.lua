-- resume.lua: let a paused queue hand out jobs again, and wake its blocked claimers.
-- transition: none for jobs (clears the queue's paused flag)
-- clock: none
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:meta       HASH  counters, clock; field 'paused'
-- KEYS[2]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[3]  leaseq:{<queue>}:scheduled  ZSET  ids waiting, score = due ms epoch
-- KEYS[4]  leaseq:{<queue>}:wake       LIST  wake-up tokens that blocked claimers wait on
-- KEYS[5]  leaseq:{<queue>}:ready      LIST  ungrouped ids of priority 0 ready to claim, FIFO
-- derives: nothing
-- returns: {1} when resumed now, {0} when it was not paused (a replay changes nothing)
-- errors: none
--!include lib/allow_oom.lua
local meta, pending, scheduled, wake = K.meta, K.pending, K.scheduled, K.wake
allow_oom(meta) -- a full server must still let this script run
if redis.call('HDEL', meta, 'paused') == 0 then return { 0 } end
-- Claimers of a paused queue sleep on the wake list: one token per pending
-- job (capped at 64, as push_pending does) wakes enough of them at once;
-- one token for scheduled jobs alone lets a claimer promote the due ones.
local want = math.min(64, redis.call('ZCARD', pending) + redis.call('LLEN', K.ready))
if want == 0 and redis.call('ZCARD', scheduled) > 0 then want = 1 end
for _ = 1, want - redis.call('LLEN', wake) do
  redis.call('RPUSH', wake, '1')
end
return { 1 }
