-- settle_cost(log, text, name, actual, claimed_at): replace a claim's estimate in the
-- cost window log (its member text .. ':' .. name, lib/cost_window.lua) by actual
-- (text), under the same claim time, and the window's sum with it. Nothing when the
-- member has left the window, or the claim was never counted there.
--!include lib/cost_sum.lua
--!include lib/put_cost_sum.lua
local function settle_cost(log, text, name, actual, claimed_at)
  if redis.call('ZREM', log, text .. ':' .. name) == 0 then return end
  redis.call('ZADD', log, claimed_at, actual .. ':' .. name)
  local member, sum = cost_sum(log)
  put_cost_sum(log, member, sum - tonumber(text) + tonumber(actual))
end
