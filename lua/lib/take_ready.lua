-- take_ready(K, n, lease_one): the claim's pop of LIST K.ready, where ungrouped jobs
-- of priority 0 wait in FIFO order: up to n ids from its head (one LPOP), each handed to
-- lease_one(id, true). An entry whose job left without being popped (cancelled,
-- deleted, past its deadline, or made again in a group or at another priority: lib/unready.lua)
-- is stale: lease_one says so (its third value), and it is dropped, one off meta field
-- ready_stale. A job that a cost limit holds back ends the pop: it and every id behind
-- it go back to the head (LPUSH, reversed), in their order. Meta field ready_popped counts
-- the ids taken off the head for good, so that an entry's place (ready_popped + its
-- index) never changes while it waits: walks and purges page by it.
-- Returns how many ids it popped (0: the list is empty), whether a job was held back,
-- and how many of the popped entries were stale.
-- KEYS  leaseq:{<queue>}:ready  LIST  ungrouped ids of priority 0 ready to claim, FIFO
--!include lib/ready_count.lua
local function take_ready(K, n, lease_one)
  local ids = redis.call('LPOP', K.ready, n)
  if not ids then return 0, false end
  local stale, kept = 0, #ids
  for i, id in ipairs(ids) do
    local _, _, elsewhere, hold = lease_one(id, true)
    if hold then
      local back = {}
      for j = #ids, i, -1 do back[#back + 1] = ids[j] end
      redis.call('LPUSH', K.ready, (table.unpack or unpack)(back))
      kept = i - 1
      break
    end
    if elsewhere then stale = stale + 1 end
  end
  if stale > 0 then ready_count(K, 'ready_stale', -stale) end
  if kept > 0 then ready_count(K, 'ready_popped', kept) end
  return #ids, kept < #ids, stale
end
