-- elapsed_us(since): microseconds on the server's TIME since `since` (a value this returned
-- before; nil: returns the time now, to start from). For a call that bounds its own work by
-- time, so it stays a short guest on a shared server whatever the server's speed.
-- Valkey 8's TIME stands still inside a script (it returns the call's start), so there a
-- budget would never run out: while TIME reads no time gone, the server's own CPU clock
-- (os.clock, which Valkey's sandbox keeps and Redis 7.0's has not) since the start counts
-- instead. The CPU clock counts every thread of the server (a call may stop early) but not
-- the time the server waits for a core: a call descheduled midway runs on for its whole
-- budget of CPU after it, so on a starved server Valkey's calls hold longer than Redis's.
local os_lib = rawget(_G, 'os')
local cpu_clock = os_lib and os_lib.clock
local cpu_at = nil
local function elapsed_us(since)
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if not since then
    cpu_at = cpu_clock and cpu_clock()
    return us
  end
  if us == since and cpu_at then return math.floor((cpu_clock() - cpu_at) * 1000000) end
  return us - since
end
