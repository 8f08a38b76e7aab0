-- settle_deferred(K, now, log, budget): go on settling the children that
-- finishing calls left for later (LIST K.releasing of '<how> <id>', oldest
-- first; settle_children), at most budget children. Claim and reap call it,
-- so a parent with more children than one call settles is done within a few
-- claims. One LLEN when there is nothing to do.
-- KEYS  leaseq:{<queue>}:releasing  LIST  parents whose children are left to settle, '<how> <id>'
--!include lib/settle_children.lua
local function settle_deferred(K, now, log, budget)
  while budget > 0 and redis.call('LLEN', K.releasing) > 0 do
    local head = redis.call('LPOP', K.releasing)
    local how, pid = string.match(head, '^(%S+) (%S+)$')
    if how then budget = settle_children(K, { { pid, how } }, now, log, budget) end
  end
end
