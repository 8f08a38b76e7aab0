-- cost_check(K, cost, group): why a new job of that cost (a number) in that fair group
-- (nil: none) could never be claimed under the cost limits set now (lib/cost_refusal.lua),
-- or nil. The enqueue scripts refuse such a job before they write anything.
-- KEYS  leaseq:{<queue>}:limits  HASH  cost_rate, cost_per_ms, group_cost_rate, group_cost_per_ms, a group's cost_rate:<name>, cost_per_ms:<name>
--!include lib/cost_limit.lua
--!include lib/cost_refusal.lua
local function cost_check(K, cost, group)
  local l = redis.call('HMGET', K.limits, 'cost_rate', 'cost_per_ms', 'group_cost_rate',
    'group_cost_per_ms', 'cost_rate:' .. (group or ''), 'cost_per_ms:' .. (group or ''))
  local why = cost_refusal(cost, 'the queue', cost_limit(l[1], l[2]))
  if group and not why then
    local budget, per = cost_limit(l[5], l[6]) -- the group's own, else the per-group one
    if not budget then budget, per = cost_limit(l[3], l[4]) end
    why = cost_refusal(cost, 'group ' .. group, budget, per)
  end
  return why
end
