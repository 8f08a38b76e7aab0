-- events.lua: read or change a queue's event-stream switch and bound, with the stream's extent.
-- transition: none (the scripts that move jobs read the switch: lib/event_log.lua)
-- clock: none
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:meta       HASH  field events ('off' = record nothing; absent = on), events_maxlen
-- KEYS[2]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- ARGV[1]  action, 'get' or 'set'
-- ARGV[2]  enabled, for 'set': 'on', 'off', or '' to leave the switch as it is
-- ARGV[3]  maxlen, for 'set': the bound in entries (decimal integer >= 1), '0' for the default, '' to leave it;
--          a lower bound trims the stream now (XTRIM MAXLEN ~)
-- derives: nothing
-- returns: flat array: enabled (1 or 0), maxlen stored ('' = the default), entries now (XLEN),
--          first entry id, last entry id ('' when the stream is empty)
-- errors: WRONGTYPE when KEYS[2] holds another type (values were validated by the caller)
--!include lib/allow_oom.lua

local meta, events = K.meta, K.events
allow_oom(meta) -- a full server must still let this script turn events off
-- A stream key overwritten by hand: say so (DamagedKey) before writing anything;
-- the transition scripts step over it (lib/flush_events.lua).
local kind = redis.call('TYPE', events)
kind = type(kind) == 'table' and kind.ok or kind
if kind ~= 'stream' and kind ~= 'none' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if A.action == 'set' then
  if A.enabled == 'off' then
    redis.call('HSET', meta, 'events', 'off')
  elseif A.enabled == 'on' then
    redis.call('HDEL', meta, 'events')
  end
  if A.maxlen == '0' then
    redis.call('HDEL', meta, 'events_maxlen')
  elseif A.maxlen ~= '' then
    redis.call('HSET', meta, 'events_maxlen', A.maxlen)
    redis.call('XTRIM', events, 'MAXLEN', '~', A.maxlen)
  end
end
local s = redis.call('HMGET', meta, 'events', 'events_maxlen')
local first = redis.call('XRANGE', events, '-', '+', 'COUNT', 1)
local last = redis.call('XREVRANGE', events, '+', '-', 'COUNT', 1)
return { s[1] == 'off' and 0 or 1, s[2] or '', redis.call('XLEN', events),
  #first > 0 and first[1][1] or '', #last > 0 and last[1][1] or '' }
