-- in_ready(state, group, priority): whether LIST ready is where a row with these fields
-- (as stored) waits: pending, in no fair group, of priority 0 (absent, or text that
-- to_count reads as 0), as push_pending and push_ready put it there. An entry of the list
-- whose row is not is stale (lib/unready.lua).
--!include lib/to_count.lua
local function in_ready(state, group, priority)
  return state == 'pending' and not group and (to_count(priority) or 0) == 0
end
