-- job_finished(K, id, job, how, now, log, links): job id (row key job) left the
-- unfinished states for good in this call -- how = 'succeeded', 'dead',
-- 'cancelled' or 'deleted' -- so settle its place in workflows
-- (docs/workflows.md) in the same call, under the same fencing check that let
-- the transition happen: as a child (row field depends_on: its parents' ids,
-- space-separated) it unpins each parent (unpin_parent); as a parent (SET
-- K.graph_prefix .. id: its children still waiting for it) its children are
-- released, counted or cancelled (settle_children: at most SETTLE_BUDGET
-- children per call, the rest left to the next claims). A transition happens
-- once, so its children are settled once: stale leases, replays and reaps that
-- retry never settle anything.
-- K: waiting, pending, scheduled, succeeded, cancelled, meta, wake, done,
-- releasing, groups, group_held, job_prefix, group_prefix, graph_prefix; log: the
-- call's event_log. links: the row's fields depends_on and children if the
-- caller read them already (lease_check does; false for a missing field), nil
-- to read them here. unpins: nil to unpin the parents now, or a table the caller
-- collects them in ({ [parent] = { child, ... }, parent, ... }: each parent once, in
-- order) to unpin each parent once with all its children (unpin_parent) when its
-- batch is done. Call it before a deleted row is deleted. One HMGET (none
-- given links) for a job with neither parents nor children. Returns true while
-- job is pinned: some of its children have not finished (field children > 0),
-- so its own retention must wait (the caller stores it in field keep and
-- indexes the row as kept).
--!include lib/settle_children.lua
--!include lib/to_count.lua
--!include lib/unpin_parent.lua
-- A page, as the claims after it settle (settle_deferred): the finishing call stays short.
local SETTLE_BUDGET = 16
local function job_finished(K, id, job, how, now, log, links, unpins)
  local row = links or redis.pcall('HMGET', job, 'depends_on', 'children')
  local damaged = row['err'] ~= nil
  if damaged then row = {} end
  if row[1] then
    for parent in string.gmatch(row[1], '%S+') do
      if unpins then
        local kids = unpins[parent]
        if not kids then
          kids = {}
          unpins[parent] = kids
          unpins[#unpins + 1] = parent
        end
        kids[#kids + 1] = id
      else
        unpin_parent(K, parent, { id }, now)
      end
    end
  end
  -- A parent's SET exists only while it has children waiting, and then its row
  -- counts them (children > 0); a row damaged by hand is looked up anyway.
  if not (damaged or row[2]) then return false end
  -- A deleted parent settles every child now: its id may be used again at
  -- once, and a later settlement must never reach the new row's children.
  settle_children(K, { { id, how } }, now, log, how == 'deleted' and 2147483647 or SETTLE_BUDGET)
  -- A success releases or counts children, so its pins stay as read; a failure
  -- may cancel some, and each cancelled child unpins it.
  if how == 'succeeded' and not damaged then return (to_count(row[2]) or 0) > 0 end
  return (to_count(redis.pcall('HGET', job, 'children')) or 0) > 0
end
