-- reset_clock.lua: drop the queue's clock floor, for an operator after a server clock ran ahead.
-- transition: none (the meta field clock only)
-- clock: server TIME, returned so the operator sees the time the queue follows again
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:meta       HASH  the clock floor (field clock)
-- derives: nothing
-- returns: {the floor that was dropped (ms epoch, -1 if none), server time now (ms epoch)}
-- errors: none
--!include lib/now_ms.lua

local meta = K.meta
local floor = tonumber(redis.call('HGET', meta, 'clock')) or -1
redis.call('HDEL', meta, 'clock')
return { floor, now_ms(meta, true) }
