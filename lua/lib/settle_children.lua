-- settle_children(K, work, now, log, budget): settle the children of finished
-- parents, at most budget children in all; work is a list of { parent id, how }
-- (how: 'succeeded', 'dead', 'cancelled', 'deleted' or 'damaged'), taken breadth
-- first; an item { parent id, how, kids } settles just those children (already
-- out of the parent's set: sweep_waiting).
-- A parent's waiting children are in SET K.graph_prefix .. <id>; each is popped
-- (SPOP) once, so it is settled once whatever runs twice, in id order within
-- the popped part. A waiting child counts the parent done when how =
-- 'succeeded' or its on_parent_failure = 'run' (then the parent joins its
-- failed_parents); at no parent left it moves to pending (priority, FIFO, fair
-- group) or, with a delay (field delay, ms, from now), to scheduled. Otherwise
-- it is cancelled, naming the parent in last_error, kept until purged (ZSET
-- K.cancelled at 10^15 + now), its own parents unpinned, and its waiting
-- children join the work. What the budget leaves goes on LIST K.releasing as
-- '<how> <id>' for settle_deferred (claim and reap go on with it), so no call
-- settles more than budget children (docs/workflows.md, "Costs").
-- Every write of a batch is batched: one HSET per child, then one ZREM, ZADD,
-- HINCRBY seq, RPUSH and XADD (done) for the batch. Returns the budget left.
-- KEYS  leaseq:{<queue>}:waiting    ZSET  ids waiting for parents
-- KEYS  leaseq:{<queue>}:scheduled  ZSET  ids waiting for a time (children released with a delay)
-- KEYS  leaseq:{<queue>}:cancelled  ZSET  cancelled ids (children cancelled with their parent)
-- KEYS  leaseq:{<queue>}:releasing  LIST  parents whose children are left to settle, '<how> <id>'
-- KEYS  leaseq:{<queue>}:done       STREAM  finished ids, for waiters (lib/signal_done.lua)
-- KEYS  leaseq:{<queue>}:wake       LIST  wake-up tokens (children released with a delay)
-- KEYS  leaseq:{<queue>}:meta       HASH  counter cancelled
-- ARGV  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string), for parents and children
-- ARGV  graph_prefix, 'leaseq:{<queue>}:graph:' (string): a job's children still waiting for it are the SET graph_prefix .. <id>
--!include lib/call_chunked.lua
--!include lib/cancel_child.lua
--!include lib/log_event.lua
--!include lib/push_ready.lua
--!include lib/signal_done.lua
--!include lib/to_count.lua
--!include lib/wake_if_first.lua
local function settle_children(K, work, now, log, budget)
  local gone, ready, due, dropped = {}, {}, {}, {}
  local batch = { gone = gone, dropped = dropped, work = work } -- what cancel_child adds to
  local first_due = nil
  local i = 1
  while i <= #work do
    local pid, how = work[i][1], work[i][2]
    i = i + 1
    local graph = K.graph_prefix .. pid
    if budget <= 0 and not work[i - 1][3] then
      if redis.call('EXISTS', graph) == 1 then redis.call('RPUSH', K.releasing, how .. ' ' .. pid) end
    else
      -- pcall: a set overwritten by hand with another type must not fail the
      -- call after the parent's own transition was written; its children then
      -- wait until an operator repairs or deletes them.
      local kids = work[i - 1][3] -- children given (sweep_waiting): taken from the set already
      if not kids then
        kids = redis.pcall('SPOP', graph, budget)
        if kids['err'] then kids = {} end
        -- SPOP gives min(budget, size): fewer than asked means the set is empty now.
        if #kids == budget and redis.call('EXISTS', graph) == 1 then
          redis.call('RPUSH', K.releasing, how .. ' ' .. pid)
        end
      end
      budget = budget - #kids
      -- In id order within the popped part, whatever order the SET keeps: children
      -- released together enter pending (FIFO) and the stream in a predictable order.
      table.sort(kids)
      local n_cut = 0
      for _, kid in ipairs(kids) do
        local job = K.job_prefix .. kid
        local k = redis.pcall('HMGET', job, 'state', 'on_parent_failure', 'delay', 'priority',
          'failed_parents', 'parents_left', 'group', 'depends_on')
        if not k['err'] and k[1] == 'waiting' then
          local failed = k[5]
          if how ~= 'succeeded' then failed = failed and (failed .. ' ' .. pid) or pid end
          local left = to_count(k[6])
          if not left then
            -- parents_left damaged by hand: never release on a guess. Cancel it,
            -- saying why, so it neither runs early nor waits for ever (the field
            -- goes: last_error keeps what it held).
            budget = budget - cancel_child(K, batch, kid, k,
              'damaged row: parents_left=' .. (k[6] or '(none)'), now, log)
            redis.call('HDEL', job, 'parents_left')
          elseif how == 'succeeded' or k[2] == 'run' then
            left = left - 1
            local row = { 'parents_left', left }
            if failed then
              row[3] = 'failed_parents'
              row[4] = failed
            end
            if left > 0 then
              -- still waiting for its other parents
            elseif (to_count(k[3]) or 0) > 0 then
              local at = now + to_count(k[3])
              row[#row + 1] = 'state'
              row[#row + 1] = 'scheduled'
              row[#row + 1] = 'run_at'
              row[#row + 1] = at
              due[#due + 1] = at
              due[#due + 1] = kid
              gone[#gone + 1] = kid
              if not first_due or at < first_due then first_due = at end
              redis.call('HDEL', job, 'delay')
              log_event(log, 'waiting', 'scheduled', kid, 0)
            else
              -- A fair group's job (k[7]) also goes to its group's ZSET and the rotation.
              row[#row + 1] = 'state'
              row[#row + 1] = 'pending'
              ready[#ready + 1] = { to_count(k[4]) or 0, kid, k[7] or nil }
              gone[#gone + 1] = kid
              log_event(log, 'waiting', 'pending', kid, 0)
            end
            redis.call('HSET', job, (table.unpack or unpack)(row))
          else
            local why = how == 'deleted' and ' was deleted' or (' is ' .. how)
            budget = budget - cancel_child(K, batch, kid, k, 'parent ' .. pid .. why, now, log)
            redis.call('HSET', job, 'failed_parents', failed)
            n_cut = n_cut + 1
          end
        end
      end
      -- Told by retry (leaseq retry): retrying this parent does not bring them back.
      if n_cut > 0 and how ~= 'deleted' then
        redis.pcall('HINCRBY', K.job_prefix .. pid, 'cancelled_children', n_cut)
      end
    end
  end
  call_chunked('ZREM', K.waiting, gone, 1000)
  push_ready(K, ready) -- one HINCRBY of seq, one ZADD per 1000
  if #due > 0 then
    call_chunked('ZADD', K.scheduled, due, 1000)
    wake_if_first(K.scheduled, K.wake, first_due)
  end
  if #dropped > 0 then
    call_chunked('ZADD', K.cancelled, dropped, 1000)
    redis.call('HINCRBY', K.meta, 'cancelled', #dropped / 2)
    local ids = {}
    for d = 2, #dropped, 2 do ids[#ids + 1] = dropped[d] end
    signal_done(K.done, ids)
  end
  return budget
end
