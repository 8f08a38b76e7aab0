-- over_budget(started, share): true once this call has worked CALL_BUDGET_US (times share,
-- 0 < share <= 1; nil: 1) on the server's TIME since started (an elapsed_us() reading taken
-- as the call began). A share below 1 leaves room for batched writes after the loop. A call that pages through
-- its work checks it between pages and stops there, saying what it left (a claim leases
-- fewer, a batch call names the first item it did not reach, a paged operation says more
-- is left), so no call holds a shared server much past a millisecond whatever the server's
-- speed: what a call does before and after its loop, and its last page, come on top
-- (docs/limits-and-costs.md, "What a call may hold"). Valkey 8's TIME stands still inside
-- a script: there the server's CPU clock counts (lib/elapsed_us.lua). Every caller keeps a
-- count bound as well, for a server with neither.
--!include lib/elapsed_us.lua
local CALL_BUDGET_US = 750
local function over_budget(started, share)
  return elapsed_us(started) > CALL_BUDGET_US * (share or 1)
end
