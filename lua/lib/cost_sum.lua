-- cost_sum(log): a cost window's 'sum:<total>' member (lib/cost_window.lua), and its
-- value; nil and 0 when it has none. It is the last member: every other score is finite.
local function cost_sum(log)
  local top = redis.call('ZRANGE', log, -1, -1)
  local text = top[1] and string.match(top[1], '^sum:(.*)$')
  if not text then return nil, 0 end
  return top[1], tonumber(text) or 0
end
