-- push_ready(K, ready): make many jobs claimable at once; ready is a list of
-- { priority, id, group or nil, seq or nil } in the order they became ready, their rows
-- already saying 'pending'. Ungrouped jobs of priority 0 go to the tail of LIST
-- K.ready in that order (one RPUSH per 1000), as push_pending puts them. The others
-- get pending_score's scores; their FIFO numbers are the entries'
-- own seq (numbers the caller reserved earlier: all have one or none does) or else
-- reserved now for the batch (reserve_seq, one HINCRBY); one ZADD
-- per 1000 into ZSET K.pending, and a wake-up token per job on LIST K.wake (64
-- at most, one RPUSH). A fair group's jobs go as push_pending puts them (their
-- group's ZSET K.group_prefix .. <name> under the score, pending at PENDING_GROUPED + score,
-- the group into the rotation K.groups unless held in K.group_held), with one
-- ZADD and one rotation check per group, not per job.
-- KEYS  leaseq:{<queue>}:pending     ZSET  ids ready to claim
-- KEYS  leaseq:{<queue>}:ready       LIST  ungrouped ids of priority 0 ready to claim, FIFO
-- KEYS  leaseq:{<queue>}:meta        HASH  fields seq (the FIFO sequence) and gseq (the rotation's next turn)
-- KEYS  leaseq:{<queue>}:groups      ZSET  fair groups with ready jobs, score = round-robin turn
-- KEYS  leaseq:{<queue>}:group_held  HASH  groups held back at group_concurrency
-- KEYS  leaseq:{<queue>}:wake        LIST  wake-up tokens for blocked claimers
-- ARGV  group_prefix, 'leaseq:{<queue>}:group:' (string): a fair group's ready ids are the ZSET group_prefix .. <name>
--!include lib/call_chunked.lua
--!include lib/pending_score.lua
--!include lib/reserve_seq.lua
local function push_ready(K, ready)
  if #ready == 0 then return end
  local members, listed, seq, groups, order = {}, {}, nil, {}, {}
  for _, r in ipairs(ready) do
    local group = r[3]
    if not group and r[1] == 0 then
      listed[#listed + 1] = r[2]
    else
      -- Numbers for the whole batch at the first job that needs one (one HINCRBY).
      if not r[4] and not seq then seq = reserve_seq(K, #ready) end
      local number = r[4]
      if not number then
        seq = seq + 1
        number = seq
      end
      local score = pending_score(r[1], number)
      if group then
        local list = groups[group]
        if not list then
          list = {}
          groups[group] = list
          order[#order + 1] = group
        end
        list[#list + 1] = score
        list[#list + 1] = r[2]
        score = PENDING_GROUPED + score
      end
      members[#members + 1] = score
      members[#members + 1] = r[2]
    end
  end
  for _, group in ipairs(order) do
    call_chunked('ZADD', K.group_prefix .. group, groups[group], 1000)
    if not redis.call('HGET', K.group_held, group) then
      redis.call('ZADD', K.groups, 'NX', redis.call('HINCRBY', K.meta, 'gseq', 1), group)
    end
  end
  call_chunked('ZADD', K.pending, members, 1000)
  call_chunked('RPUSH', K.ready, listed, 1000)
  local room = math.min(#ready, 64 - redis.call('LLEN', K.wake))
  if room > 0 then
    local tokens = {}
    for t = 1, room do tokens[t] = '1' end
    redis.call('RPUSH', K.wake, (table.unpack or unpack)(tokens))
  end
end
