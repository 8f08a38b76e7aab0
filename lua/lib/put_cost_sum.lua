-- put_cost_sum(log, old, sum): replace a cost window's sum member (old: the one read,
-- or nil) by one for sum; none once nothing else is in the window (the sum of nothing).
local function put_cost_sum(log, old, sum)
  if old then redis.call('ZREM', log, old) end
  if redis.call('ZCARD', log) == 0 then return end
  if sum < 0 then sum = 0 end -- rounding of fractional costs
  local text = (sum == math.floor(sum) and sum < 2 ^ 53) and string.format('%d', sum)
    or string.format('%.17g', sum)
  redis.call('ZADD', log, 'inf', 'sum:' .. text)
end
