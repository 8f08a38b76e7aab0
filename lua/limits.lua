-- limits.lua: read or change a queue's global limits, with how close the queue is to them.
-- transition: none (limits are enforced by claim.lua)
-- clock: server TIME (never behind the queue's meta clock), read without moving it, to count the claims of the rate span
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:limits  HASH  concurrency, rate, per_ms
-- KEYS[2]  leaseq:{<queue>}:active  ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[3]  leaseq:{<queue>}:claims  ZSET  claim times of the rate span, score = ms epoch
-- KEYS[4]  leaseq:{<queue>}:meta    HASH  clock floor, limit_held
-- KEYS[5]  leaseq:{<queue>}:wake    LIST  wake-up tokens
-- KEYS[6]  leaseq:{<queue>}:groups       ZSET  fair groups with ready jobs, score = round-robin turn
-- KEYS[7]  leaseq:{<queue>}:group_active HASH  group -> leases active now
-- KEYS[8]  leaseq:{<queue>}:group_held   HASH  groups held back at group_concurrency
-- KEYS[9]  leaseq:{<queue>}:group_rate_held  ZSET  groups held back at their rate (lib/rotate_groups.lua)
-- KEYS[10] leaseq:{<queue>}:costs        ZSET  the queue's cost window (lib/cost_window.lua)
-- ARGV[1]  action, 'get' or 'set'
-- ARGV[2]  group_prefix, 'leaseq:{<queue>}:group:' (string): a fair group's ready ids are
--          the ZSET group_prefix .. <name>
-- ARGV[3..] fields, for 'set': field, value pairs (concurrency, rate, per_ms, group_concurrency,
--           group_rate, group_per_ms, cost_per_ms, group_cost_per_ms, and a group's own
--           concurrency:<name>, rate:<name>, per_ms:<name>, cost_per_ms:<name>: decimal
--           integers; cost_rate, group_cost_rate, cost_rate:<name>: a finite number > 0 as
--           decimal text; '' removes the field). The field group_overrides
--           is kept here: how many fields of a group's own there are (claim reads them only then).
-- derives: leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix)
-- returns: flat array: now_ms, active leases, claims in the last per_ms (0 without a rate),
--          groups with ready jobs in the rotation, groups with active leases, groups held
--          at group_concurrency, the most leases active in one group, the cost claimed in the
--          last cost_per_ms (decimal text; 0 without a cost limit),
--          then the limits hash as field, value pairs
-- errors: none (values were validated by the caller)
--!include lib/allow_oom.lua
--!include lib/cost_in_window.lua
--!include lib/cost_limit.lua
--!include lib/now_ms.lua
--!include lib/to_count.lua

local limits, active, claims, meta, wake = K.limits, K.active, K.claims, K.meta, K.wake
allow_oom(meta) -- a full server must still let this script run
if A.action == 'set' then
  for i = TAIL.args, #ARGV, 2 do
    if ARGV[i + 1] == '' then
      redis.call('HDEL', limits, ARGV[i])
    else
      redis.call('HSET', limits, ARGV[i], ARGV[i + 1])
    end
  end
  -- HGET, not HEXISTS: the least-privilege ACL list of docs/reliability.md has no HEXISTS.
  if not redis.call('HGET', limits, 'rate') then redis.call('DEL', claims) end
  if not redis.call('HGET', limits, 'cost_rate') then redis.call('DEL', K.costs) end
  local fields, own = redis.call('HGETALL', limits), 0
  for i = 1, #fields, 2 do
    if string.find(fields[i], ':', 1, true) then own = own + 1 end
  end
  if own > 0 then redis.call('HSET', limits, 'group_overrides', own)
  else redis.call('HDEL', limits, 'group_overrides') end
  -- Rates changed: every group held at its rate rejoins the rotation (at the
  -- back); the next claim holds it again if it is still at its rate.
  for _, group in ipairs(redis.call('ZRANGE', K.group_rate_held, 0, -1)) do
    if redis.call('ZCARD', K.group_prefix .. group) > 0 then
      redis.call('ZADD', K.groups, 'NX', redis.call('HINCRBY', meta, 'gseq', 1), group)
      redis.call('HSET', meta, 'limit_held', 1)
    end
  end
  redis.call('DEL', K.group_rate_held)
  -- Fair groups: a group_concurrency raised or removed lets the held groups
  -- that are now below it back into the rotation (at the back).
  local cap = to_count(redis.call('HGET', limits, 'group_concurrency'))
  -- In name order, so the rotation they rejoin does not depend on set order.
  local pairs_ = redis.call('HGETALL', K.group_held)
  local held = {}
  for i = 1, #pairs_, 2 do held[#held + 1] = pairs_[i] end
  table.sort(held)
  for _, group in ipairs(held) do
    local n = tonumber(redis.call('HGET', K.group_active, group) or '0') or 0
    local own_cap = to_count(redis.call('HGET', limits, 'concurrency:' .. group)) or cap
    if not own_cap or n < own_cap then
      redis.call('HDEL', K.group_held, group)
      if redis.call('ZCARD', K.group_prefix .. group) > 0 then
        redis.call('ZADD', K.groups, 'NX', redis.call('HINCRBY', meta, 'gseq', 1), group)
        redis.call('HSET', meta, 'limit_held', 1)
      end
    end
  end
  -- A limit raised or removed may free slots now: wake the claimers held back
  -- (at most 64 tokens, as everywhere; a claim that finds nothing clears them).
  if redis.call('HDEL', meta, 'limit_held') == 1 then
    local tokens = {}
    for t = 1, 64 - math.min(64, redis.call('LLEN', wake)) do tokens[t] = '1' end
    if #tokens > 0 then redis.call('RPUSH', wake, (table.unpack or unpack)(tokens)) end
  end
end
local now = now_ms(meta, true)
local per = to_count(redis.call('HGET', limits, 'per_ms')) -- as claim reads it
if per == 0 then per = nil end
local recent = 0
if per then recent = redis.call('ZCOUNT', claims, '(' .. (now - per), '+inf') end
-- HGETALL rather than HLEN/HVALS: the commands a least-privilege user needs stay
-- those of docs/reliability.md. Both hashes stay small: at most one field per
-- active lease, and per group with ready jobs.
local counts = redis.call('HGETALL', K.group_active)
local most = 0
for i = 2, #counts, 2 do most = math.max(most, tonumber(counts[i]) or 0) end
local budget, cost_per = cost_limit(redis.call('HGET', limits, 'cost_rate'),
  redis.call('HGET', limits, 'cost_per_ms'))
local cost = cost_per and cost_in_window(K.costs, budget, cost_per, now) or 0
local out = { now, redis.call('ZCARD', active), recent, redis.call('ZCARD', K.groups),
  #counts / 2, #redis.call('HGETALL', K.group_held) / 2, most, string.format('%.15g', cost) }
local h = redis.call('HGETALL', limits)
for i = 1, #h do out[#out + 1] = h[i] end
return out
