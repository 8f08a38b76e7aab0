-- cost_in_window(log, budget, per, now): the cost a window (lib/cost_window.lua) counts
-- in its last per ms, read without writing: its sum less the members that have left the
-- span but that no claim has trimmed yet (at most 256 of them read). A window damaged
-- by hand, which claims read as full (lib/cost_sum.lua), counts the whole budget.
--!include lib/cost_sum.lua
local function cost_in_window(log, budget, per, now)
  local _, sum = cost_sum(log)
  if sum == math.huge then return budget end
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, '-inf', now - per, 'LIMIT', 0, 256)) do
    sum = sum - (tonumber(string.match(m, '^[^:]*')) or 0)
  end
  return math.max(0, sum)
end
