-- elapsed_us(since): microseconds on the server's TIME since `since` (a value this returned
-- before; nil: returns the time now, to start from). For a call that bounds its own work by
-- time, so it stays a short guest on a shared server whatever the server's speed.
local function elapsed_us(since)
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return since and us - since or us
end
