-- suspend.lua: end a held lease's attempt asleep until a time (current_job().sleep): no lease, no slot, the attempt refunded.
-- transition: active -> suspended
-- clock: server TIME (never behind the queue's meta clock), for the wake time run_at
-- flags: none (it may grow a row: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- KEYS[2]  leaseq:{<queue>}:active     ZSET  ids under lease, score = lease_until ms epoch
-- KEYS[3]  leaseq:{<queue>}:suspended  ZSET  ids asleep, score = run_at ms epoch
-- KEYS[4]  leaseq:{<queue>}:meta       HASH  counters, seq, clock
-- KEYS[5]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- ARGV[1]  id, the job id (string)
-- ARGV[2]  token, the lease's attempts value (decimal string)
-- ARGV[3]  incarnation, the lease's row incarnation (decimal string)
-- ARGV[4]  name, the sleep's step name (string); stored as field 'step:<name>', so the run that
--          resumes passes it at once
-- ARGV[5]  value, the step's record, encoded by the queue's codec (bytes)
-- ARGV[6]  sleep_ms, how long to sleep (integer ms >= 0)
-- derives: leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix)
-- returns: {'OK', run_at} the ms epoch it wakes at
-- errors: {'LOST', state, attempts, incarnation} when the lease is not held under token and incarnation;
--         {'DAMAGED', field, value} when max_attempts is not a count (the lease then runs out)
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/group_done.lua
--!include lib/lease_check.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/to_count.lua

local job, meta, id = K.job, K.meta, A.id
local refused, group = lease_check(job, A.token, A.incarnation)
if refused then return refused end
local max_attempts = redis.call('HGET', job, 'max_attempts')
if not to_count(max_attempts) then
  return { 'DAMAGED', 'max_attempts', max_attempts or '' }
end

-- A sleep is not a failure: attempts still grows at every claim (the fencing
-- token), so the attempt it used is refunded by raising max_attempts, as a
-- release does.
local now = now_ms(meta)
local run_at = now + tonumber(A.sleep_ms)
redis.call('HSET', job, 'max_attempts', to_count(max_attempts) + 1)
redis.call('HSET', job, 'state', 'suspended')
redis.call('HSET', job, 'run_at', run_at)
redis.call('HSET', job, 'step:' .. A.name, A.value)
redis.call('HDEL', job, 'lease_until', 'prefetched')
redis.call('ZREM', K.active, id)
redis.call('ZADD', K.suspended, run_at, id)
group_done(K, job, group)
local log = event_log(K.events, nil, meta)
log_event(log, 'active', 'suspended', id, A.token)
if log.n > 0 then flush_events(log, now) end
return { 'OK', run_at }
