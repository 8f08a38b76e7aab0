-- settle_spent(K, job, id, token, number, group, actual, keep): a finishing lease (held:
-- the caller checked it) reports what its run really spent (actual, decimal text): its
-- claim's estimate is replaced by actual in the queue's cost window and its group's
-- (lib/settle_cost.lua; nothing where its claim has left the window or was never
-- counted), and the row keeps it as spent unless keep is false (a release of a lease
-- whose handler never began: its 0 is no run's spend). Settled below the estimate in its group's
-- window, a group that claims sent out of the rotation for a window (ZSET
-- group_rate_held: lib/rotate_groups.lua) rejoins it at the back, with a wake-up
-- token: the room it gave back may fit the group's next job now, not when the
-- estimate would have left (the next claim holds the group again if it does not fit,
-- or is at its rate), as a settle in the queue's window wakes a held claim.
-- KEYS  leaseq:{<queue>}:costs  ZSET  the queue's cost window (lib/cost_window.lua)
-- KEYS  leaseq:{<queue>}:group_rate_held  ZSET  groups held back at their rate or cost window, score = ms epoch they may claim again
-- KEYS  leaseq:{<queue>}:groups  ZSET  fair groups with ready jobs, score = round-robin turn
-- KEYS  leaseq:{<queue>}:meta  HASH  field gseq, the rotation's next turn
-- KEYS  leaseq:{<queue>}:wake  LIST  wake-up tokens for blocked claimers
-- ARGV  group_costs_prefix, 'leaseq:{<queue>}:group_costs:' (string): a fair group's cost window is the ZSET group_costs_prefix .. <name>
-- ARGV  group_prefix, 'leaseq:{<queue>}:group:' (string): a fair group's ready ids are the ZSET group_prefix .. <name>
--!include lib/cost_text.lua
--!include lib/settle_cost.lua
local function settle_spent(K, job, id, token, number, group, actual, keep)
  local r = redis.call('HMGET', job, 'cost', 'claimed_at')
  local text, estimate = cost_text(r[1])
  local name = (r[2] or '') .. ':' .. id .. ':' .. token .. ':' .. number
  settle_cost(K.costs, text, name, actual, r[2])
  if group and settle_cost(K.group_costs_prefix .. group, text, name, actual, r[2])
      and tonumber(actual) < estimate
      and redis.call('ZREM', K.group_rate_held, group) == 1
      and redis.call('ZCARD', K.group_prefix .. group) > 0 then
    redis.call('ZADD', K.groups, 'NX', redis.call('HINCRBY', K.meta, 'gseq', 1), group)
    if redis.call('LLEN', K.wake) < 64 then redis.call('RPUSH', K.wake, '1') end
  end
  if keep ~= false then redis.call('HSET', job, 'spent', actual) end
end
