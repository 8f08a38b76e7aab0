-- settle_deferred(K, now, log, budget, started): go on settling the children that
-- finishing calls left for later (LIST K.releasing of '<how> <id>', oldest
-- first; settle_children), at most budget children, SETTLE_PAGE at a time, and
-- none past the call's time budget (started: its elapsed_us() start; over_budget).
-- Claim and reap call it, so a parent with more children than one call settles is
-- done within a few claims. One LLEN when there is nothing to do.
-- KEYS  leaseq:{<queue>}:releasing  LIST  parents whose children are left to settle, '<how> <id>'
--!include lib/over_budget.lua
--!include lib/settle_children.lua
local SETTLE_PAGE = 8
local function settle_deferred(K, now, log, budget, started)
  while budget > 0 and not over_budget(started) and redis.call('LLEN', K.releasing) > 0 do
    local head = redis.call('LPOP', K.releasing)
    local how, pid = string.match(head, '^(%S+) (%S+)$')
    if how then
      -- A page's leftover children put the parent back at the tail (settle_children).
      local page = math.min(budget, SETTLE_PAGE)
      budget = budget - page + settle_children(K, { { pid, how } }, now, log, page)
    end
  end
end
