-- complete.lua: finish held leases as succeeded, one or many in one call.
-- transition: active -> succeeded (the row then lives keep_ms, or is deleted at once)
-- clock: server TIME, for finished_at and retention
-- KEYS[1]  leaseq:{<queue>}:active     ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[2]  leaseq:{<queue>}:succeeded  ZSET  succeeded ids, score = ms epoch the row expires (+inf: kept)
-- KEYS[3]  leaseq:{<queue>}:meta       HASH  counters
-- KEYS[4..] leaseq:{<queue>}:job:<id>  HASH  one job row per item, in item order
-- ARGV[1]  keep_ms, how long to keep the succeeded row (integer ms; 0 = delete now, -1 = until purged)
-- ARGV[2..] three values per item: id (string), token (decimal string),
--           result (encoded bytes; '' = no result)
-- derives: nothing
-- returns: one reply per item: {'OK'} or {'LOST', state, attempts}
-- errors: none beyond the per-item LOST replies
--!include lib/now_ms.lua
--!include lib/lease_check.lua
--!include lib/retain.lua
--!include lib/trim_finished.lua

local active, succeeded, meta = KEYS[1], KEYS[2], KEYS[3]
local keep_ms = tonumber(ARGV[1])
local now = now_ms()
local out = {}
local done = 0

for i = 4, #KEYS do
  local job = KEYS[i]
  local base = 2 + (i - 4) * 3
  local id, token, result = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  local refused = lease_check(job, token)
  if refused then
    out[#out + 1] = refused
  else
    redis.call('HSET', job, 'state', 'succeeded', 'finished_at', now)
    redis.call('HDEL', job, 'lease_until')
    if result ~= '' then
      redis.call('HSET', job, 'result', result)
    end
    redis.call('ZREM', active, id)
    retain(job, succeeded, id, now, keep_ms)
    done = done + 1
    out[#out + 1] = { 'OK' }
  end
end
if done > 0 then
  redis.call('HINCRBY', meta, 'succeeded', done)
  trim_finished(succeeded, now, 100 + done)
end
return out
