-- cost_text(v): a row's cost field as claims and settles both write it in a cost
-- window's members, and its value: '1' and 1 when the field is absent (the default
-- cost, not stored) or edited by hand to anything but a finite positive number.
--!include lib/to_cost.lua
local function cost_text(v)
  local c = to_cost(v)
  if c then return v, c end
  return '1', 1
end
