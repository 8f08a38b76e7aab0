-- cost_limit(rate, per): the budget and span (ms) of a cost limit's two fields as
-- stored (limits.lua: a finite positive number, decimal ms), or nil: a field edited by
-- hand to anything else is no limit, as claim, stats and limits all read it.
--!include lib/to_cost.lua
--!include lib/to_count.lua
local function cost_limit(rate, per)
  local r, p = to_cost(rate), to_count(per)
  if r and p and p > 0 then return r, p end
  return nil
end
