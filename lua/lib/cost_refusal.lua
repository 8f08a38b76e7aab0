-- cost_refusal(cost, whose, budget, per): why a job of that cost can never be claimed
-- under a cost limit of budget per per ms (whose: 'the queue', 'group <name>'), or nil
-- when it fits the budget. Enqueue refuses such a job; a claim dead-letters one
-- enqueued before the limit was set (lib/cost_gate.lua).
local function cost_refusal(cost, whose, budget, per)
  if not budget or cost <= budget * (1 + 1e-12) then return nil end
  return string.format('cost %.15g is above the cost limit of %s (%.15g per %g s)',
    cost, whose, budget, per / 1000)
end
