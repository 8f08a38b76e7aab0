-- tally(t, key, n): add n to t[key] (from 0 when absent). A key seen for the first
-- time is also appended to t's array part, so ipairs(t) lists the keys in the order
-- they were first tallied (keys are strings: never one of the array's integer
-- indexes). For the per-group and per-parent counts a batch writes once at its end.
-- Returns nothing.
local function tally(t, key, n)
  local was = t[key]
  if not was then
    t[#t + 1] = key
    was = 0
  end
  t[key] = was + n
end
