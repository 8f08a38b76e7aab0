-- now_ms(): the server's clock as integer milliseconds since the Unix epoch.
-- Every deadline and schedule in leaseq comes from here, never from a client.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
