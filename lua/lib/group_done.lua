-- group_done(K, job, group, n): n leases (1 if nil) of a grouped row's group end (complete,
-- fail, release, reap): n fewer active in its group (HASH K.group_active), and a group held at
-- its cap (HASH K.limits: 'concurrency:<name>', else group_concurrency) with ready jobs (ZSET K.group_prefix .. <name>)
-- rejoins the rotation (ZSET K.groups) once it is below the limit again, with a
-- wake-up token on K.wake for blocked claimers. A row without a group changes
-- nothing. Call it before the
-- row is deleted or rewritten. group: the row's group if the caller read it
-- (lease_check does), false for none, nil to read it here. Returns nothing.
--
-- Whether any group is held is read once per script call: only claim's
-- rotation adds to group_held, and claim calls this (through reap) before it
-- rotates, so within one call an empty group_held stays empty. That keeps a
-- completion of a grouped row at one HINCRBY (and an HDEL) with no cap held.
-- KEYS  leaseq:{<queue>}:group_active  HASH  group -> leases active now
-- KEYS  leaseq:{<queue>}:group_held    HASH  groups held back at group_concurrency
-- KEYS  leaseq:{<queue>}:limits        HASH  limits: group_concurrency, 'concurrency:<name>'
-- KEYS  leaseq:{<queue>}:groups        ZSET  fair groups with ready jobs, score = round-robin turn
-- KEYS  leaseq:{<queue>}:meta          HASH  field gseq, the rotation's next turn
-- KEYS  leaseq:{<queue>}:wake          LIST  wake-up tokens for blocked claimers
-- ARGV  group_prefix, 'leaseq:{<queue>}:group:' (string): a fair group's ready ids are the ZSET group_prefix .. <name>
local group_held_empty = nil
local function group_done(K, job, group, n)
  if group == nil then group = redis.call('HGET', job, 'group') end
  if not group then return end
  local left = redis.call('HINCRBY', K.group_active, group, -(n or 1))
  if left <= 0 then redis.call('HDEL', K.group_active, group) end
  if group_held_empty == nil then
    group_held_empty = redis.call('EXISTS', K.group_held) == 0
  end
  if group_held_empty then return end
  if not redis.call('HGET', K.group_held, group) then return end
  local own = redis.call('HMGET', K.limits, 'concurrency:' .. group, 'group_concurrency')
  local cap = tonumber(own[1] or '') or tonumber(own[2] or '') -- the group's own cap first
  if cap and left >= cap then return end -- a limit lowered below what is active
  redis.call('HDEL', K.group_held, group)
  if redis.call('ZCARD', K.group_prefix .. group) > 0 then
    redis.call('ZADD', K.groups, 'NX', redis.call('HINCRBY', K.meta, 'gseq', 1), group)
    if redis.call('LLEN', K.wake) < 64 then redis.call('RPUSH', K.wake, '1') end
  end
end
