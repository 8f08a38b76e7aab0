-- register.lua: a worker says it is alive (or, with ttl 0, that it left); lists nothing.
-- transition: none for jobs (writes the worker's own row and the queue's worker index)
-- clock: server TIME via now_ms (read only: the floor is not moved), for 'started', 'seen' and the expiry score
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:meta         HASH  counters, clock (read for the clock floor)
-- KEYS[2]  leaseq:{<queue>}:workers      ZSET  worker ids, score = when the row expires, ms epoch
-- KEYS[3]  leaseq:{<queue>}:worker:<id>  HASH  the worker's row (fields as in docs/keys-and-rows.md)
-- ARGV[1]  id, the worker id (string)
-- ARGV[2]  ttl_ms, how long the row lives without a refresh (integer ms; 0 = remove it now)
-- ARGV[3]  host, the worker's host name (string)
-- ARGV[4]  pid, its process id (integer)
-- ARGV[5]  queue, the queue's name as the worker sees it (string)
-- ARGV[6]  concurrency, how many jobs it runs at once (integer)
-- ARGV[7]  done, jobs this worker finished since it started (integer)
-- ARGV[8]  running, leases it holds now (integer)
-- derives: nothing
-- returns: {1}
-- errors: none
--!include lib/allow_oom.lua
--!include lib/now_ms.lua
--!include lib/trim_workers.lua

local meta, index, row = K.meta, K.workers, K.worker
allow_oom(row) -- a full server must still let a worker say it is alive (a few bytes)
local id, ttl = A.id, tonumber(A.ttl_ms)
local now = now_ms(meta, true)
trim_workers(index, now) -- rows that expired: trimmed as we go
if ttl <= 0 then
  redis.call('DEL', row)
  redis.call('ZREM', index, id)
  return { 1 }
end
redis.call('HSETNX', row, 'started', now)
redis.call('HSET', row, 'id', id, 'host', A.host, 'pid', A.pid, 'queue', A.queue,
  'concurrency', A.concurrency, 'done', A.done, 'running', A.running, 'seen', now, 'ttl_ms', ttl)
redis.call('PEXPIRE', row, ttl)
redis.call('ZADD', index, now + ttl, id)
return { 1 }
