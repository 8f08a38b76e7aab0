-- rotate_groups(pending, meta, limits, count, budget, lease_one, got): fair groups' part of a
-- claim. Each turn takes the group at the head of ZSET <stem>groups (lowest round-robin
-- number), pops its best job from ZSET <stem>group:<name> (priority, then FIFO), removes the
-- id from pending and leases it with lease_one(id); the group goes to the back (a fresh meta
-- gseq) or leaves the rotation once empty. The ungrouped jobs take one turn too, as if they
-- were one more group (their place: meta gturn). A group at group_concurrency (HASH limits;
-- active count in HASH <stem>group_active) leaves the rotation for HASH <stem>group_held
-- until group_done lets it back. Stops at count leases (got() says how many so far), when
-- budget turns run out, or when no group has ready jobs. <stem> is the meta key less 'meta'.
-- Each turn is O(log n) in jobs and groups. Returns the budget left.
local function rotate_groups(pending, meta, limits, count, budget, lease_one, got)
  local stem = string.sub(meta, 1, -5)
  local groups = stem .. 'groups'
  if redis.call('ZCARD', groups) == 0 then return budget end
  local cap = tonumber(redis.call('HGET', limits, 'group_concurrency') or '')
  while got() < count and budget > 0 do
    local head = redis.call('ZRANGE', groups, 0, 0, 'WITHSCORES')
    if #head == 0 then break end
    budget = budget - 1
    local u = redis.call('ZRANGE', pending, 0, 0, 'WITHSCORES')
    local turn = tonumber(redis.call('HGET', meta, 'gturn') or '0') or 0
    if #u > 0 and tonumber(u[2]) < 9007199254740992 and turn <= tonumber(head[2]) then
      -- The ungrouped jobs' turn: today's path, one job.
      redis.call('ZPOPMIN', pending)
      lease_one(u[1])
      redis.call('HSET', meta, 'gturn', redis.call('HINCRBY', meta, 'gseq', 1))
    else
      local group = head[1]
      local ready = stem .. 'group:' .. group
      if cap and (tonumber(redis.call('HGET', stem .. 'group_active', group) or '0') or 0) >= cap then
        redis.call('ZREM', groups, group)
        redis.call('HSET', stem .. 'group_held', group, 1)
      else
        local p = redis.call('ZPOPMIN', ready)
        if #p > 0 then
          redis.call('ZREM', pending, p[1])
          lease_one(p[1])
        end
        if redis.call('ZCARD', ready) == 0 then
          redis.call('ZREM', groups, group)
        else
          redis.call('ZADD', groups, redis.call('HINCRBY', meta, 'gseq', 1), group)
        end
      end
    end
  end
  return budget
end
