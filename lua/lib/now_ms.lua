-- now_ms(meta, peek): the queue's clock as integer milliseconds since the Unix
-- epoch: the server's TIME, but never earlier than the newest time this
-- queue's scripts have already read (field 'clock' of its meta hash).
-- Every deadline and schedule in leaseq comes from here, never from a
-- client. The floor matters after a failover to a replica whose clock is
-- behind: without it, new deadlines could land before ones already handed
-- out, and a lease extended on the new primary could end sooner than it
-- did on the old one. peek = true reads without moving the floor (stats
-- must not write, nor create the meta key of a queue that does not exist).
local function now_ms(meta, peek)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local floor = tonumber(redis.call('HGET', meta, 'clock')) or 0
  if now > floor then
    if not peek then redis.call('HSET', meta, 'clock', now) end
    return now
  end
  return floor
end
