-- drop.lua: delete a whole queue, a bounded number of jobs per call; the queue stays paused meanwhile.
-- transition: every state -> (deleted); active too only when forced
-- clock: server TIME (never behind the queue's meta clock), stamped as the pause
-- KEYS[1]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[2]  leaseq:{<queue>}:scheduled  ZSET  ids waiting
-- KEYS[3]  leaseq:{<queue>}:active     ZSET  ids under lease
-- KEYS[4]  leaseq:{<queue>}:succeeded  ZSET  succeeded ids
-- KEYS[5]  leaseq:{<queue>}:dead       ZSET  dead ids
-- KEYS[6]  leaseq:{<queue>}:cancelled  ZSET  cancelled ids
-- KEYS[7]  leaseq:{<queue>}:meta       HASH  counters, clock, paused flag
-- KEYS[8]  leaseq:{<queue>}:wake       LIST  wake-up tokens
-- KEYS[9]  leaseq:{<queue>}:done       STREAM  finished ids, for waiters (lib/signal_done.lua)
-- KEYS[10] leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/design.md)
-- ARGV[1]  job key prefix, 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  limit, the most jobs to delete in this call (integer >= 1)
-- ARGV[3]  force: 1 deletes leased (active) jobs too, 0 refuses while any exist
-- derives: leaseq:{<queue>}:job:<id>  HASH  the job rows
--           leaseq:{<queue>}:history:m:<minute> and :history:t:<ten-minute>  HASH  history buckets, deleted with the meta hash
--          leaseq:{<queue>}:job:<id>  HASH  the job rows; at the end the fair groups' keys
--          leaseq:{<queue>}:groups ZSET, group_held HASH, group_active HASH, group:<name> ZSET
--          (stem of KEYS[7])
-- returns: {'OK', deleted, remaining}; once remaining is 0 the meta hash, wake list, done and events
--          streams are gone too (so the last call's deletions leave no event)
-- errors: {'ACTIVE', n} when not forced and n leases are in flight (nothing written)
--!include lib/allow_oom.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/state_kind.lua

local meta, wake = KEYS[7], KEYS[8]
allow_oom(meta) -- a full server must still let this script run
local job_prefix, limit, force = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local held = redis.call('ZCARD', KEYS[3])
if held > 0 and not force then return { 'ACTIVE', held } end
-- Paused while the drop runs over several calls, so no claim leases a job
-- that the next call deletes.
if not redis.call('HGET', meta, 'paused') then
  redis.call('HSET', meta, 'paused', now_ms(meta))
end
local deleted, budget = 0, limit
local log = event_log(KEYS[10], KEYS[9], meta)
for _, index in ipairs({ KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6] }) do
  if budget <= 0 then break end
  local ids = redis.call('ZRANGE', index, 0, budget - 1)
  for _, id in ipairs(ids) do
    local got = redis.pcall('HMGET', job_prefix .. id, 'state', 'attempts')
    local gone = redis.call('DEL', job_prefix .. id)
    if gone == 1 then
      local from = not got['err'] and state_kind(got[1] or '') and got[1] or 'damaged'
      log_event(log, from, 'deleted', id, not got['err'] and got[2] or 0)
    end
    deleted = deleted + gone
    redis.call('ZREM', index, id)
  end
  budget = budget - #ids
end
local remaining = 0
for _, index in ipairs({ KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6] }) do
  remaining = remaining + redis.call('ZCARD', index)
end
if remaining > 0 then flush_events(log, now_ms(meta)) end
if remaining == 0 then
  -- The history buckets go too (those that can exist: the last 61 minutes and
  -- the last 145 ten-minutes), and the fair groups' bookkeeping with the jobs
  -- (a forced drop of active grouped jobs would otherwise leave counts that
  -- hold a group forever): a dropped queue leaves nothing behind.
  local now, stem = now_ms(meta), string.sub(meta, 1, -5)
  local m, t = math.floor(now / 60000), math.floor(now / 600000)
  for i = m - 61, m + 1 do redis.call('DEL', stem .. 'history:m:' .. i) end
  for i = t - 145, t + 1 do redis.call('DEL', stem .. 'history:t:' .. i) end
  local names = redis.call('ZRANGE', stem .. 'groups', 0, -1)
  local held = redis.call('HGETALL', stem .. 'group_held')
  for i = 1, #held, 2 do names[#names + 1] = held[i] end
  for _, g in ipairs(names) do redis.call('DEL', stem .. 'group:' .. g) end
  redis.call('DEL', meta, wake, stem .. 'groups', stem .. 'group_held', stem .. 'group_active',
    KEYS[9], KEYS[10])
end
return { 'OK', deleted, remaining }
