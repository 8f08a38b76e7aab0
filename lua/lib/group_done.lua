-- group_done(meta, job): a lease of a grouped row ends (complete, fail, release, reap):
-- one fewer active in its group (HASH <stem>group_active), and a group held at
-- group_concurrency with ready jobs rejoins the rotation (ZSET <stem>groups) once it
-- is below the limit again, with a wake-up token for blocked claimers. A row without
-- a group changes nothing. <stem> is the meta key less 'meta'. Call it before the
-- row is deleted or rewritten. group: the row's group if the caller read it
-- (lease_check does), false for none, nil to read it here. Returns nothing.
--
-- Whether any group is held is read once per script call: only claim's
-- rotation adds to group_held, and claim calls this (through reap) before it
-- rotates, so within one call an empty group_held stays empty. That keeps a
-- completion of a grouped row at one HINCRBY (and an HDEL) with no cap held.
local group_held_empty = nil
local function group_done(meta, job, group)
  if group == nil then group = redis.call('HGET', job, 'group') end
  if not group then return end
  local stem = string.sub(meta, 1, -5)
  local left = redis.call('HINCRBY', stem .. 'group_active', group, -1)
  if left <= 0 then redis.call('HDEL', stem .. 'group_active', group) end
  if group_held_empty == nil then
    group_held_empty = redis.call('EXISTS', stem .. 'group_held') == 0
  end
  if group_held_empty then return end
  if not redis.call('HGET', stem .. 'group_held', group) then return end
  local cap = tonumber(redis.call('HGET', stem .. 'limits', 'group_concurrency') or '')
  if cap and left >= cap then return end -- a limit lowered below what is active
  redis.call('HDEL', stem .. 'group_held', group)
  if redis.call('ZCARD', stem .. 'group:' .. group) > 0 then
    redis.call('ZADD', stem .. 'groups', 'NX', redis.call('HINCRBY', meta, 'gseq', 1), group)
    if redis.call('LLEN', stem .. 'wake') < 64 then redis.call('RPUSH', stem .. 'wake', '1') end
  end
end
