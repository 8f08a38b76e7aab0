-- tick.lua: turn each due schedule into exactly one job and move it to its next due time.
-- transition: (none) -> pending, one job per schedule whose due time has come
-- clock: server TIME (never behind the queue's meta clock), which alone decides that a schedule is due
-- flags: none (it adds work: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:schedules  ZSET  schedule names, score = next due ms epoch
-- KEYS[2]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[3]  leaseq:{<queue>}:meta       HASH  counters, seq, clock
-- KEYS[4]  leaseq:{<queue>}:wake       LIST  wake-up tokens for blocked claimers
-- KEYS[5]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[6]  leaseq:{<queue>}:unique       HASH  uniqueness key -> holder id (lib/unique_held.lua)
-- KEYS[7]  leaseq:{<queue>}:deadlines    ZSET  ids with a start-by deadline, score = it, ms epoch
-- ARGV[1]  schedule_prefix, the schedule key prefix 'leaseq:{<queue>}:schedule:' (string)
-- ARGV[2]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string)
-- ARGV[3..] schedules, four values per schedule: name; the stamp read (version:last_fired);
--           the due time read (ms epoch); the due time after it (ms epoch, computed by
--           the client from the definition, after both that due time and the clock
--           read; -1 parks a schedule whose definition cannot be read); looked at in
--           order, and none past the time budget (lib/over_budget.lua) after the first page
-- derives: leaseq:{<queue>}:schedule:<name>  HASH  each schedule (schedule_prefix);
--          leaseq:{<queue>}:job:<id>  HASH  the jobs it makes (job_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix);
--          leaseq:{<queue>}:history:m:<minute>, :history:t:<ten-minute>  HASH  history counts (history_prefix)
--          A schedule with a uniqueness key (field unique) skips a due time while the key's
--          holder is unfinished (counted in its field skipped), and its job holds the key.
-- returns: {jobs created, schedules moved on, schedules looked at: fewer than sent when the call
--          stopped at its time budget (the caller reads the rest again)}
-- errors: none; a schedule changed, removed or fired since the read is left alone
--!include lib/bump_counter.lua
--!include lib/check_ready.lua
--!include lib/elapsed_us.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/log_event.lua
--!include lib/now_ms.lua
--!include lib/over_budget.lua
--!include lib/push_pending.lua
--!include lib/reserve_incarnations.lua
--!include lib/unique_held.lua

local started_us = elapsed_us()
local index, pending, meta, wake = K.schedules, K.pending, K.meta, K.wake
check_ready(K) -- before any write
local schedule_prefix, job_prefix = A.schedule_prefix, A.job_prefix
local now = now_ms(meta)
local created, moved, looked = 0, 0, 0
local log = event_log(K.events, nil, meta)
-- In pages of PAGE schedules while the time budget lasts (over_budget; one page
-- at least): a schedule that makes a job costs a score of calls.
local PAGE = 8
for i = TAIL.args, #ARGV, 4 do
  if looked > 0 and looked % PAGE == 0 and over_budget(started_us) then break end
  looked = looked + 1
  local name, stamp, due, after = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  local key = schedule_prefix .. name
  local row = {}
  if redis.call('TYPE', key).ok == 'hash' then
    row = redis.call('HMGET', key, 'version', 'last_fired', 'next_due',
      'payload', 'max_attempts', 'priority', 'kind', 'group', 'timeout_ms', 'unique', 'cost',
      'expires_ms')
  end
  -- Compare and set: only the definition and due time this client read,
  -- and only once that due time has come on the server's clock. A second
  -- ticker, a replayed call, or a tick racing an upsert or unschedule
  -- finds the stamp or the due time changed and does nothing.
  local at = tonumber(due)
  if not row[1] then
    -- A stale index entry (the hash went by hand): drop it. An upsert
    -- writes the hash and its entry together, so this is never a new one.
    redis.call('ZREM', index, name)
  elseif row[1] .. ':' .. (row[2] or '') == stamp and (row[3] or '') == due
      and (not at or at <= now) then
    if not at or after < 0 then
      redis.call('ZADD', index, 'inf', name)
      redis.call('HSET', key, 'next_due', 'never',
        'error', 'definition cannot be read; schedule it again')
    else
      local id = 'schedule:' .. name .. ':' .. due
      local job = job_prefix .. id
      -- The job id is a function of the schedule and the due time: even
      -- with the schedule state lost, one due time never makes two jobs.
      local ukey = row[10]
      if ukey and redis.call('EXISTS', job) == 0 and unique_held(K, job_prefix, ukey, now) then
        redis.call('HINCRBY', key, 'skipped', 1)
      elseif redis.call('EXISTS', job) == 0 and row[4] then
        local priority = tonumber(row[6] or '') or 0
        -- A row number like enqueue's, so a lease of an earlier row under this
        -- id can never act on this one (docs/keys-and-rows.md, "Incarnations").
        local incarnation = reserve_incarnations(meta, 1, now) + 1
        redis.call('HSET', job, 'attempts', 0, 'max_attempts', tonumber(row[5] or '') or 1,
          'payload', row[4], 'enqueued_at', now, 'schedule', name, 'due_at', due,
          'incarnation', string.format('%d', incarnation))
        if priority > 0 then redis.call('HSET', job, 'priority', priority) end
        if row[7] then redis.call('HSET', job, 'kind', row[7]) end
        if row[8] then redis.call('HSET', job, 'group', row[8]) end -- before push_pending
        if tonumber(row[9] or '') then redis.call('HSET', job, 'timeout', row[9]) end
        if row[11] then redis.call('HSET', job, 'cost', row[11]) end
        if tonumber(row[12] or '') then -- a start-by deadline that long after this job's making
          local at = now + tonumber(row[12])
          redis.call('HSET', job, 'expires_at', string.format('%d', at))
          redis.call('ZADD', K.deadlines, at, id)
        end
        if ukey then
          redis.call('HSET', job, 'unique_key', ukey)
          redis.call('HSET', K.unique, ukey, id)
        end
        push_pending(pending, K, job, id, priority)
        log_event(log, 'new', 'pending', id, 0)
        created = created + 1
      end
      redis.call('HSET', key, 'last_fired', due, 'next_due', after)
      redis.call('HINCRBY', key, 'fired', 1)
      redis.call('ZADD', index, after, name)
    end
    moved = moved + 1
  end
end
if created > 0 then bump_counter(K, 'enqueued', created, now) end
flush_events(log, now)
return { created, moved, looked }
