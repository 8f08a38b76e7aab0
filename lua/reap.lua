-- reap.lua: hand back up to limit expired leases: to pending while attempts remain, else dead.
-- transition: active -> pending | dead (last_error says the lease expired)
-- clock: server TIME (never behind the queue's meta clock), to tell which leases have expired
-- KEYS[1]  leaseq:{<queue>}:active     ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[2]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[3]  leaseq:{<queue>}:dead       ZSET  dead ids, score = died ms epoch
-- KEYS[4]  leaseq:{<queue>}:meta       HASH  counters, seq
-- KEYS[5]  leaseq:{<queue>}:wake       LIST  wake-up tokens
-- KEYS[6]  leaseq:{<queue>}:done       STREAM  finished ids, for waiters (lib/signal_done.lua)
-- KEYS[7]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/design.md)
-- ARGV[1]  job key prefix, 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  limit, the most index entries to look at (integer >= 1)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the job rows
--           leaseq:{<queue>}:history:m:<minute> and :history:t:<ten-minute>  HASH  history counts (bump_counter)
--          for a grouped row (group_done, stem of the meta key): leaseq:{<queue>}:group_active  HASH,
--          leaseq:{<queue>}:group_held  HASH, leaseq:{<queue>}:groups  ZSET, leaseq:{<queue>}:group:<name>  ZSET
-- returns: {requeued, died, more} -- more is 1 when expired entries remain
-- errors: none
--!include lib/allow_oom.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/now_ms.lua
--!include lib/reap_expired.lua

local active, pending, dead, meta, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
allow_oom(meta) -- a full server must still let this script drain the queue
local now = now_ms(meta)
local log = event_log(KEYS[7], KEYS[6], meta)
local requeued, died = reap_expired(active, pending, dead, meta, wake, ARGV[1], now,
  tonumber(ARGV[2]), log)
flush_events(log, now)
local more = 0
if #redis.call('ZRANGEBYSCORE', active, '-inf', now, 'LIMIT', 0, 1) > 0 then
  more = 1
end
return { requeued, died, more }
