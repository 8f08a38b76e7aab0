-- sweep_waiting(K, now, log, limit): look at up to limit waiting jobs (ZSET
-- K.waiting, a slice further on at each call: meta field wsweep holds where
-- the next begins) for parents that can no longer settle them: a parent row
-- deleted by hand before it finished, or damaged (not a hash, an unknown
-- state). Such a parent's edge is taken out of its set (SREM: if it is not
-- there, the parent settled the child already) and the child is settled as
-- that parent's failure (settle_children: 'deleted' or 'damaged'), so no child
-- waits for ever on a parent that is gone. A healthy parent is left alone.
-- Also drops index entries whose row is no longer waiting, and parks a waiting
-- row overwritten by hand in ZSET K.dead. Reap calls it.
-- KEYS  leaseq:{<queue>}:waiting  ZSET  ids waiting for parents
-- KEYS  leaseq:{<queue>}:dead     ZSET  dead ids (a waiting row overwritten by hand is parked there)
-- KEYS  leaseq:{<queue>}:meta     HASH  field wsweep, where the next sweep begins
-- ARGV  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string), for children and parents
-- ARGV  graph_prefix, 'leaseq:{<queue>}:graph:' (string): a job's children still waiting for it are the SET graph_prefix .. <id>
--!include lib/bump_counter.lua
--!include lib/log_event.lua
--!include lib/settle_children.lua
--!include lib/state_kind.lua
local function sweep_waiting(K, now, log, limit)
  local from = tonumber(redis.call('HGET', K.meta, 'wsweep')) or 0
  local ids = redis.call('ZRANGE', K.waiting, from, from + limit - 1)
  local nxt = #ids < limit and 0 or from + #ids
  if nxt ~= from then redis.call('HSET', K.meta, 'wsweep', nxt) end -- nothing waiting: no write
  local work = {}
  for _, id in ipairs(ids) do
    local row = redis.pcall('HMGET', K.job_prefix .. id, 'state', 'depends_on')
    if row['err'] then
      -- The waiting row itself overwritten by hand: park it in dead for an
      -- operator to see, as claim does with a pending one, and settle its children.
      redis.call('ZREM', K.waiting, id)
      redis.call('ZADD', K.dead, now, id)
      bump_counter(K, 'dead', 1, now)
      log_event(log, 'damaged', 'dead', id, 0)
      work[#work + 1] = { id, 'damaged' }
    else
      if row[1] ~= 'waiting' then
        redis.call('ZREM', K.waiting, id) -- a stale entry; the row is elsewhere or gone
      elseif row[2] then
        for parent in string.gmatch(row[2], '%S+') do
          local state = redis.pcall('HGET', K.job_prefix .. parent, 'state')
          local how = (type(state) == 'table' and 'damaged') or (not state and 'deleted')
            or (not state_kind(state) and 'damaged') or nil
          if how and redis.pcall('SREM', K.graph_prefix .. parent, id) == 1 then
            work[#work + 1] = { parent, how, { id } }
          end
        end
      end
    end
  end
  if #work > 0 then settle_children(K, work, now, log, 1000) end
end
