-- pause.lua: stop a queue handing out jobs; enqueue still works and leases in flight finish.
-- transition: none for jobs (sets the queue's paused flag; claim then leases nothing)
-- clock: server TIME (never behind the queue's meta clock), stored as when the pause began
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:meta       HASH  counters, clock; field 'paused' = ms epoch paused at
-- derives: nothing
-- returns: {1} when paused now, {0} when it already was (a replay changes nothing)
-- errors: none
--!include lib/allow_oom.lua
--!include lib/now_ms.lua

local meta = K.meta
allow_oom(meta) -- a full server must still let this script run
if redis.call('HGET', meta, 'paused') then return { 0 } end
redis.call('HSET', meta, 'paused', now_ms(meta))
return { 1 }
