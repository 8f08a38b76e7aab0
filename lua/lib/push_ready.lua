-- push_ready(K, ready): make many ungrouped jobs claimable at once; ready is a
-- list of { priority, id } in the order they became ready, their rows already
-- saying 'pending'. push_pending's scores and rules for the FIFO sequence (meta
-- field seq), reserved with one HINCRBY for the batch, one ZADD per 1000 into
-- ZSET K.pending, and a wake-up token per job on LIST K.wake (64 at most).
--!include lib/call_chunked.lua
local function push_ready(K, ready)
  if #ready == 0 then return end
  local last = redis.call('HINCRBY', K.meta, 'seq', #ready)
  if (last - #ready > 4294967296 and redis.call('ZCARD', K.pending) == 0)
      or last >= 8589934592 then
    redis.call('HSET', K.meta, 'seq', #ready)
    last = #ready
  end
  local members, seq = {}, last - #ready
  for _, r in ipairs(ready) do
    seq = seq + 1
    members[#members + 1] = r[1] * 8589934592 + seq
    members[#members + 1] = r[2]
  end
  call_chunked('ZADD', K.pending, members, 1000)
  local room = math.min(#ready, 64 - redis.call('LLEN', K.wake))
  for _ = 1, room do redis.call('RPUSH', K.wake, '1') end
end
