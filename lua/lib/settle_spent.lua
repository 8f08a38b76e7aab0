-- settle_spent(K, job, id, token, number, group, actual): a finishing lease (held: the
-- caller checked it) reports what its run really spent (actual, decimal text): its
-- claim's estimate is replaced by actual in the queue's cost window and its group's
-- (lib/settle_cost.lua; nothing where its claim has left the window or was never
-- counted), and the row keeps it as spent.
-- KEYS  leaseq:{<queue>}:costs  ZSET  the queue's cost window (lib/cost_window.lua)
-- ARGV  group_costs_prefix, 'leaseq:{<queue>}:group_costs:' (string): a fair group's cost window is the ZSET group_costs_prefix .. <name>
--!include lib/cost_text.lua
--!include lib/settle_cost.lua
local function settle_spent(K, job, id, token, number, group, actual)
  local r = redis.call('HMGET', job, 'cost', 'claimed_at')
  local text = cost_text(r[1])
  local name = (r[2] or '') .. ':' .. id .. ':' .. token .. ':' .. number
  settle_cost(K.costs, text, name, actual, r[2])
  if group then settle_cost(K.group_costs_prefix .. group, text, name, actual, r[2]) end
  redis.call('HSET', job, 'spent', actual)
end
