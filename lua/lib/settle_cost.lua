-- settle_cost(log, text, name, actual, claimed_at): replace a claim's estimate in the
-- cost window log (its member text .. ':' .. name, lib/cost_window.lua) by actual
-- (text), under the same claim time, and the window's sum with it. True if it did;
-- nothing (nil) when the member has left the window, the claim was never counted
-- there, or the key is not a window (damaged by hand: a settle never fails the
-- completion that carries it, which may have finished other leases of its call).
--!include lib/cost_sum.lua
--!include lib/put_cost_sum.lua
local function settle_cost(log, text, name, actual, claimed_at)
  local removed = redis.pcall('ZREM', log, text .. ':' .. name)
  if type(removed) ~= 'number' or removed == 0 then return nil end
  redis.call('ZADD', log, claimed_at, actual .. ':' .. name)
  local member, sum = cost_sum(log)
  put_cost_sum(log, member, sum - tonumber(text) + tonumber(actual))
  return true
end
