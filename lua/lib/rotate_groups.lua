-- rotate_groups(pending, K, count, budget, lease_one, got): fair groups' part of a
-- claim. Each turn takes the group at the head of ZSET K.groups (lowest round-robin
-- number), pops its best job from ZSET K.group_prefix .. <name> (priority, then FIFO), removes the
-- id from pending and leases it with lease_one(id); the group goes to the back (a fresh meta
-- gseq) or leaves the rotation once empty. The ungrouped jobs take one turn too, as if they
-- were one more group (their place: meta gturn). A group at group_concurrency (HASH K.limits;
-- active count in HASH K.group_active) leaves the rotation for HASH K.group_held
-- until group_done lets it back. Stops at count leases (got() says how many so far), when
-- budget turns run out, or when no group has ready jobs.
-- Each turn is O(log n) in jobs and groups. Returns the budget left.
--
-- Cost: the turns are taken a pass at a time. A group that takes its turn goes
-- behind every group now in the rotation (its fresh gseq is above every score),
-- so the order of the next K turns is the order of the first K heads, read with
-- one ZRANGE; the groups sent to the back or out are written with one ZADD and
-- one ZREM per pass, the leased ids leave pending with one ZREM per call, and
-- gseq/gturn are read once and written once. Per turn that leaves ZPOPMIN and
-- ZCARD of the group's ready set. The order is exactly the turn-by-turn one
-- (tests/store/test_model.py models it).
--!include lib/call_chunked.lua
--!include lib/to_count.lua
local GROUPED = 9007199254740992 -- pending scores from 2^53 up are grouped ids (push_pending)
local function rotate_groups(pending, K, count, budget, lease_one, got)
  local meta, groups = K.meta, K.groups
  if redis.call('ZCARD', groups) == 0 then return budget end
  local cap = to_count(redis.call('HGET', K.limits, 'group_concurrency')) -- lib/to_count.lua
  local seqs = redis.call('HMGET', meta, 'gturn', 'gseq')
  local turn, seq = tonumber(seqs[1] or '0') or 0, tonumber(seqs[2] or '0') or 0
  local seq_at_start = seq
  -- The ungrouped head changes only when an ungrouped job is popped: grouped
  -- ids sort behind every ungrouped one, so removing them later is safe.
  local u = redis.call('ZRANGE', pending, 0, 0, 'WITHSCORES')
  local ungrouped = #u > 0 and tonumber(u[2]) < GROUPED
  local taken = {}
  while got() < count and budget > 0 do
    local heads = redis.call('ZRANGE', groups, 0, math.min(count - got(), budget) - 1, 'WITHSCORES')
    if #heads == 0 then break end
    local back, out = {}, {}
    for h = 1, #heads, 2 do
      if got() >= count or budget <= 0 then break end
      local group = heads[h]
      if ungrouped and turn <= tonumber(heads[h + 1]) then
        -- The ungrouped jobs' turn comes before this group's: one job.
        budget = budget - 1
        local p = redis.call('ZPOPMIN', pending)
        lease_one(p[1])
        seq = seq + 1
        turn = seq
        u = redis.call('ZRANGE', pending, 0, 0, 'WITHSCORES')
        ungrouped = #u > 0 and tonumber(u[2]) < GROUPED
        if got() >= count or budget <= 0 then break end
      end
      budget = budget - 1
      local ready = K.group_prefix .. group
      if cap and (tonumber(redis.call('HGET', K.group_active, group) or '0') or 0) >= cap then
        out[#out + 1] = group
        redis.call('HSET', K.group_held, group, 1)
      else
        local p = redis.call('ZPOPMIN', ready)
        if #p > 0 then
          taken[#taken + 1] = p[1]
          lease_one(p[1])
        end
        if redis.call('ZCARD', ready) == 0 then
          out[#out + 1] = group
        else
          seq = seq + 1
          back[#back + 1] = seq
          back[#back + 1] = group
        end
      end
    end
    if #back > 0 then call_chunked('ZADD', groups, back, 1000) end
    if #out > 0 then call_chunked('ZREM', groups, out, 1000) end
  end
  if #taken > 0 then call_chunked('ZREM', pending, taken, 1000) end
  if seq ~= seq_at_start then
    redis.call('HSET', meta, 'gturn', string.format('%d', turn), 'gseq', string.format('%d', seq))
  end
  return budget
end
