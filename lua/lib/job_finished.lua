-- job_finished(K, id, job, how, now, log, links): job id (row key job) left the unfinished
-- states for good in this call -- how = 'succeeded', 'dead', 'cancelled' or
-- 'deleted' -- so settle its place in workflows (docs/workflows.md), in the same
-- call, under the same fencing check that let the transition happen:
--  * as a child (row field depends_on: its parents' ids, space-separated), it
--    unpins each parent (unpin_parent);
--  * as a parent (SET K.graph_prefix .. id: its children still waiting for it),
--    each waiting child counts it done -- how = 'succeeded', or the child's
--    on_parent_failure = 'run' (then id joins its failed_parents) -- and runs
--    once no parent is left (release_child); else (on_parent_failure 'cancel', the
--    default) the child is cancelled, naming this parent in last_error, and kept
--    until purged (K.cancelled at 10^15 + now). A cancelled child has finished in
--    turn, so the cascade goes on (a work list, not recursion). The SET is deleted:
--    each parent settles its children once, whatever runs twice or later.
-- K: waiting, pending, scheduled, succeeded, cancelled, meta, wake, done, groups,
-- group_held, job_prefix, group_prefix, history_prefix, graph_prefix; log: the
-- call's event_log; the done STREAM K.done is signalled once for the cancelled children.
-- links: the row's fields depends_on and children if the caller read them already
-- (lease_check does; false for a missing field), nil to read them here.
-- Call it before a deleted row is deleted. One HMGET (none given links) for a
-- job with neither parents nor children. Returns true while job is pinned: some of its children
-- have not finished (field children > 0), so its own retention must wait (the
-- caller stores it in field keep and indexes the row as kept).
--!include lib/log_event.lua
--!include lib/release_child.lua
--!include lib/signal_done.lua
--!include lib/to_count.lua
--!include lib/unpin_parent.lua
local function job_finished(K, id, job, how, now, log, links)
  local work, i, pinned, cancelled = { { id, job, how } }, 1, false, {}
  while i <= #work do
    local cid, cjob, chow = work[i][1], work[i][2], work[i][3]
    local row = (i == 1 and links) or redis.pcall('HMGET', cjob, 'depends_on', 'children')
    local damaged = row['err'] ~= nil
    if damaged then row = {} end
    if i == 1 then pinned = (to_count(row[2]) or 0) > 0 end
    i = i + 1
    if row[1] then
      for parent in string.gmatch(row[1], '%S+') do unpin_parent(K, parent, cid, now) end
    end
    -- A parent's SET exists only while it has children waiting, and then its
    -- row counts them (children > 0); a row damaged by hand is looked up anyway.
    local kids = (damaged or row[2]) and redis.call('SMEMBERS', K.graph_prefix .. cid) or {}
    if #kids > 0 then redis.call('DEL', K.graph_prefix .. cid) end
    -- In id order, whatever order the SET keeps: children released by one call
    -- enter pending (FIFO) and the event stream in an order anyone can predict.
    table.sort(kids)
    local cut = 0
    for _, kid in ipairs(kids) do
      local kjob = K.job_prefix .. kid
      local k = redis.pcall('HMGET', kjob, 'state', 'on_parent_failure', 'delay', 'priority',
        'failed_parents')
      if not k['err'] and k[1] == 'waiting' then
        if chow == 'succeeded' or k[2] == 'run' then
          if chow ~= 'succeeded' then
            redis.call('HSET', kjob, 'failed_parents', k[5] and (k[5] .. ' ' .. cid) or cid)
          end
          if redis.call('HINCRBY', kjob, 'parents_left', -1) <= 0 then
            release_child(K, kid, kjob, to_count(k[3]), to_count(k[4]) or 0, now, log)
          end
        else
          local why = chow == 'deleted' and ' was deleted' or (' is ' .. chow)
          redis.call('ZREM', K.waiting, kid)
          redis.call('HSET', kjob, 'state', 'cancelled', 'finished_at', now,
            'last_error', 'parent ' .. cid .. why, 'failed_parents',
            k[5] and (k[5] .. ' ' .. cid) or cid)
          redis.call('HDEL', kjob, 'delay')
          redis.call('ZADD', K.cancelled, 1000000000000000 + now, kid)
          redis.call('HINCRBY', K.meta, 'cancelled', 1)
          cancelled[#cancelled + 1] = kid
          log_event(log, 'waiting', 'cancelled', kid, 0)
          work[#work + 1] = { kid, kjob, 'cancelled' }
          cut = cut + 1
        end
      end
    end
    -- Told by retry (leaseq retry): retrying this job does not bring them back.
    if cut > 0 and chow ~= 'deleted' and not damaged then
      redis.call('HINCRBY', cjob, 'cancelled_children', cut)
    end
  end
  if #cancelled > 0 then signal_done(K.done, table.concat(cancelled, ' ')) end
  if pinned then pinned = (to_count(redis.call('HGET', job, 'children')) or 0) > 0 end
  return pinned
end
