-- cost_sum(log): a cost window's 'sum:<total>' member (lib/cost_window.lua), and its
-- value; nil and 0 when the window is empty. A window damaged by hand reads as full
-- (math.huge), so the limit errs on the safe side until the key expires (one span after
-- its last claim) or its members have all left: members with no sum, a sum that is not
-- a finite number >= 0 ('sum:abc', 'sum:-5'), and a key of another type (then the third
-- value is true: it cannot be read or written as a window at all). The sum is the last
-- member: every other score is finite.
local function cost_sum(log)
  local top = redis.pcall('ZRANGE', log, -1, -1)
  if top.err then return nil, math.huge, true end
  if not top[1] then return nil, 0 end
  local text = string.match(top[1], '^sum:(.*)$')
  local sum = tonumber(text or '')
  if not sum or sum ~= sum or sum < 0 or sum == math.huge then
    return text and top[1] or nil, math.huge
  end
  return top[1], sum
end
