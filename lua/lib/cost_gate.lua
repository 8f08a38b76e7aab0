-- cost_gate(K, now): the cost limits one claim enforces (docs/flow-control.md), or nil
-- when none is set: the queue's (limits cost_rate per cost_per_ms) and each fair
-- group's (its own cost_rate:<name> per cost_per_ms:<name>, else group_cost_rate per
-- group_cost_per_ms), each a sliding window of claimed cost on the server clock
-- (lib/cost_window.lua), a group's read once a call, the first time a job of it comes up.
-- check(text, group): may a job of that cost (its row's cost field) and group be
-- claimed now? nil: yes; 'queue', ms: the queue's window has no room for it until then
-- (the claim stops: FIFO); 'group', ms: its group's window has none until then (the
-- group sits out); 'dead', why: its cost is above a whole budget, it never will.
-- take(text, group, name): count a claim made ('<claim ms>:<id>:<attempts>:<number>');
-- write(): the windows' new members and sums, once, at the end of the call.
-- KEYS  leaseq:{<queue>}:limits  HASH  cost_rate, cost_per_ms, group_cost_rate, group_cost_per_ms, a group's cost_rate:<name>, cost_per_ms:<name>, group_overrides
-- KEYS  leaseq:{<queue>}:costs   ZSET  the queue's cost window (lib/cost_window.lua)
-- ARGV  group_costs_prefix, 'leaseq:{<queue>}:group_costs:' (string): a fair group's cost window is the ZSET group_costs_prefix .. <name>
--!include lib/cost_limit.lua
--!include lib/cost_refusal.lua
--!include lib/cost_text.lua
--!include lib/cost_window.lua
--!include lib/to_count.lua
local function cost_gate(K, now)
  local l = redis.call('HMGET', K.limits, 'cost_rate', 'cost_per_ms', 'group_cost_rate',
    'group_cost_per_ms', 'group_overrides')
  local qb, qp = cost_limit(l[1], l[2])
  local gb, gp = cost_limit(l[3], l[4])
  local overrides = (to_count(l[5]) or 0) > 0
  if not qb and not gb and not overrides then return nil end
  local queue = qb and cost_window(K.costs, qb, qp, now) or nil
  local windows, order = {}, {}
  local window = function(group)
    if not group then return nil end
    local w = windows[group]
    if w == nil then
      local b, p = gb, gp
      if overrides then
        local o = redis.call('HMGET', K.limits, 'cost_rate:' .. group, 'cost_per_ms:' .. group)
        local ob, op = cost_limit(o[1], o[2])
        if ob then b, p = ob, op end
      end
      w = b and cost_window(K.group_costs_prefix .. group, b, p, now) or false
      windows[group] = w
      order[#order + 1] = group
    end
    return w or nil
  end
  local gate = {}
  function gate.check(text, group)
    local _, cost = cost_text(text)
    local g = window(group)
    local why = (queue and cost_refusal(cost, 'the queue', queue.budget, queue.per))
      or (g and cost_refusal(cost, 'group ' .. group, g.budget, g.per))
    if why then return 'dead', why end
    if queue and not queue.fits(cost) then return 'queue', queue.free_at(cost) end
    if g and not g.fits(cost) then return 'group', g.free_at(cost) end
    return nil
  end
  function gate.take(text, group, name)
    local t, cost = cost_text(text)
    if queue then queue.take(t, cost, name) end
    local g = window(group)
    if g then g.take(t, cost, name) end
  end
  function gate.write()
    if queue then queue.write() end
    for _, group in ipairs(order) do
      if windows[group] then windows[group].write() end
    end
  end
  return gate
end
