-- now_ms(meta, peek): the queue's clock as integer milliseconds since the Unix
-- epoch: the server's TIME, but never earlier than the newest time this
-- queue's scripts have already read (field 'clock' of its meta hash) --
-- unless that floor is more than 10 s ahead of the server, then the server's
-- TIME again (and the floor follows it down).
-- Every deadline and schedule in leaseq comes from here, never from a
-- client. The floor matters after a failover to a replica whose clock is
-- slightly behind: without it, new deadlines could land before ones already
-- handed out. The 10 s bound matters after a clock that jumped forward was
-- corrected: an unbounded floor would hold the queue's time still (no lease
-- expires, no delay elapses) until real time caught up, hours maybe.
-- peek = true reads without moving the floor (stats must not write, nor
-- create the meta key of a queue that does not exist). stored: the floor field
-- as the caller already read it in this call (false = unset; nil = read it here).
-- now_ms_held: true after a call that found the floor ahead of the server's
-- TIME (the queue's time stands still, so rows made now share one enqueued_at;
-- enqueue then numbers them, lib/row_number.lua).
local now_ms_held = false
local function now_ms(meta, peek, stored)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if stored == nil then stored = redis.call('HGET', meta, 'clock') end
  local floor = tonumber(stored) or 0
  now_ms_held = floor > now and floor - now <= 10000
  if floor >= now and floor - now <= 10000 then
    return floor
  end
  if not peek then redis.call('HSET', meta, 'clock', now) end
  return now
end
