-- workers.lua: the workers registered on a queue, oldest registration first.
-- transition: none (trims expired ids from the worker index)
-- clock: server TIME via now_ms (read only: the floor is not moved)
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:meta         HASH  counters, clock (read for the clock floor)
-- KEYS[2]  leaseq:{<queue>}:workers      ZSET  worker ids, score = when the row expires, ms epoch
-- ARGV[1]  worker_prefix, the prefix of worker rows, leaseq:{<queue>}:worker: (string)
-- ARGV[2]  limit, most workers returned (integer)
-- derives: leaseq:{<queue>}:worker:<id>  HASH  each listed worker's row
-- returns: {now_ms, id1, {field, value, ...}, id2, {...}, ...}
-- errors: none
--!include lib/allow_oom.lua
--!include lib/now_ms.lua
--!include lib/trim_workers.lua

local meta, index = K.meta, K.workers
allow_oom(meta) -- only deletes: a full server must still list its workers
local prefix, limit = A.worker_prefix, tonumber(A.limit)
local now = now_ms(meta, true)
trim_workers(index, now)
local out = { now }
for _, id in ipairs(redis.call('ZRANGE', index, 0, limit - 1)) do
  local fields = redis.call('HGETALL', prefix .. id)
  if #fields == 0 then
    redis.call('ZREM', index, id) -- the row expired on a clock a little ahead of ours
  else
    out[#out + 1] = id
    out[#out + 1] = fields
  end
end
return out
