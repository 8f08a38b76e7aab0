-- limits.lua: read or change a queue's global limits, with how close the queue is to them.
-- transition: none (limits are enforced by claim.lua)
-- clock: server TIME (never behind the queue's meta clock), read without moving it, to count the claims of the rate span
-- KEYS[1]  leaseq:{<queue>}:limits  HASH  concurrency, rate, per_ms
-- KEYS[2]  leaseq:{<queue>}:active  ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[3]  leaseq:{<queue>}:claims  ZSET  claim times of the rate span, score = ms epoch
-- KEYS[4]  leaseq:{<queue>}:meta    HASH  clock floor, limit_held
-- KEYS[5]  leaseq:{<queue>}:wake    LIST  wake-up tokens
-- ARGV[1]  'get' or 'set'
-- ARGV[2..] for 'set': field, value pairs (concurrency, rate, per_ms: decimal integers;
--           '' removes the field)
-- derives: nothing
-- returns: flat array: now_ms, active leases, claims in the last per_ms (0 without a rate),
--          then the limits hash as field, value pairs
-- errors: none (values were validated by the caller)
--!include lib/now_ms.lua
--!include lib/allow_oom.lua

local limits, active, claims, meta, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
allow_oom(meta) -- a full server must still let this script run
if ARGV[1] == 'set' then
  for i = 2, #ARGV, 2 do
    if ARGV[i + 1] == '' then
      redis.call('HDEL', limits, ARGV[i])
    else
      redis.call('HSET', limits, ARGV[i], ARGV[i + 1])
    end
  end
  if redis.call('HEXISTS', limits, 'rate') == 0 then redis.call('DEL', claims) end
  -- A limit raised or removed may free slots now: wake the claimers held back
  -- (at most 64 tokens, as everywhere; a claim that finds nothing clears them).
  if redis.call('HDEL', meta, 'limit_held') == 1 then
    local tokens = {}
    for t = 1, 64 - math.min(64, redis.call('LLEN', wake)) do tokens[t] = '1' end
    if #tokens > 0 then redis.call('RPUSH', wake, (table.unpack or unpack)(tokens)) end
  end
end
local now = now_ms(meta, true)
local per = tonumber(redis.call('HGET', limits, 'per_ms') or '')
local recent = 0
if per then recent = redis.call('ZCOUNT', claims, '(' .. (now - per), '+inf') end
local out = { now, redis.call('ZCARD', active), recent }
local h = redis.call('HGETALL', limits)
for i = 1, #h do out[#out + 1] = h[i] end
return out
