-- retry.lua: give a dead job more attempts and make it pending again.
-- transition: dead -> pending
-- clock: server TIME, read without moving the queue's floor, only to stamp the event-stream entry
-- flags: none (it adds work: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- KEYS[2]  leaseq:{<queue>}:dead       ZSET  dead ids, score = died ms epoch
-- KEYS[3]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[4]  leaseq:{<queue>}:meta       HASH  counters, seq
-- KEYS[5]  leaseq:{<queue>}:wake       LIST  wake-up tokens
-- KEYS[6]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[7]  leaseq:{<queue>}:deadlines  ZSET  ids with a start-by deadline, score = it, ms epoch
-- ARGV[1]  id, the job id (string)
-- ARGV[2]  extra, attempts to grant on top of those already used (integer >= 1)
-- ARGV[3]  payload, a new payload for the job (bytes, encoded and size-checked by the caller;
--          '' = keep its own); the old one goes to the event stream (lib/log_edit.lua)
-- ARGV[4]  expires, the retried job's new start-by deadline ('' = none; '+<ms>': that long from
--          now; '<ms>': that ms epoch), as enqueue.lua's
-- derives: leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix);
--          leaseq:{<queue>}:job:<id>  HASH  the job's parents, pinned again (job_prefix)
-- returns: {'OK', new max_attempts}
-- errors: {'SETTLING'} while the job's children are still being settled; {'GONE'} for an unknown id; {'STATE', state} when the job is not dead (both drop
--         a stale dead-set entry); {'DAMAGED', field, value} when state or attempts is damaged
--         (field '<key>' when the job key is not a hash)
--!include lib/check_ready.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/log_edit.lua
--!include lib/now_ms.lua
--!include lib/retry_row.lua

local job, dead, pending, meta, wake = K.job, K.dead, K.pending, K.meta, K.wake
check_ready(K) -- before any write
local log = event_log(K.events, nil, meta)
local old = A.payload ~= '' and redis.pcall('HMGET', job, 'payload', 'attempts') or nil
local reply = retry_row(job, dead, pending, K, A.id, tonumber(A.extra), nil, log)
if log.n > 0 then flush_events(log, now_ms(meta, true)) end
if A.expires ~= '' and reply[1] == 'OK' then
  local now = now_ms(meta, true)
  local at = string.sub(A.expires, 1, 1) == '+' and now + tonumber(string.sub(A.expires, 2))
    or tonumber(A.expires)
  redis.call('HSET', job, 'expires_at', string.format('%d', at))
  redis.call('ZADD', K.deadlines, at, A.id)
end
if old and reply[1] == 'OK' then
  -- Edit and retry: the payload is replaced in the same call, the old one kept
  -- in the event stream so the edit can be traced and undone.
  redis.call('HSET', job, 'payload', A.payload)
  log_edit(K, 'updated', A.id, 'dead', old[2], old[1], now_ms(meta, true))
end
return reply
