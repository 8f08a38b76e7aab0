-- reap_expired(active, pending, dead, K, job_prefix, now, limit, log):
-- hand back at most limit jobs whose lease deadline has passed
-- (lease_until <= now): to pending while attempts remain, else to dead.
-- A lease that never reached a handler (row field prefetched == attempts: the
-- worker prefetched it and never said it started) gets its attempt refunded by
-- raising max_attempts, at most 5 times per job (row field refunds).
-- Each move is noted in log (event_log): active -> pending | dead, damaged -> dead.
-- Returns requeued, died.
-- Atomic with every other script, so two reapers never move a job twice.
-- KEYS  leaseq:{<queue>}:meta  HASH  counter refunded
-- KEYS  leaseq:{<queue>}:deadlines  ZSET  ids with a start-by deadline: a job handed back to pending that has one is indexed there again (its claim took it out)
--!include lib/bump_counter.lua
--!include lib/dead_letter.lua
--!include lib/group_done.lua
--!include lib/job_finished.lua
--!include lib/log_event.lua
--!include lib/note_failure.lua
--!include lib/push_pending.lua
--!include lib/read_row.lua
--!include lib/state_kind.lua
--!include lib/to_count.lua
local function reap_expired(active, pending, dead, K, job_prefix, now, limit, log)
  local requeued, died = 0, 0
  local max_refunds = 5 -- per job: a job that kills its worker every run still dies
  local ids = redis.call('ZRANGEBYSCORE', active, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(ids) do
    local job = job_prefix .. id
    local row = read_row(job, 'state', 'attempts', 'max_attempts',
      'lease_until', 'priority', 'worker', 'prefetched', 'refunds', 'expires_at')
    local deadline = row and to_count(row[4])
    if not row then
      -- Overwritten by hand with another type: park the id in dead for an
      -- operator to see (there is no row to write a reason into).
      redis.call('ZREM', active, id)
      redis.call('ZADD', dead, now, id)
      bump_counter(K, 'dead', 1, now)
      log_event(log, 'damaged', 'dead', id, 0)
      job_finished(K, id, job, 'dead', now, log) -- its children must not wait forever
      died = died + 1
    elseif row[1] ~= 'active' then
      -- Stale index entry: the row left 'active' (or is gone).
      redis.call('ZREM', active, id)
      local s = row[1]
      if s and not state_kind(s) then
        -- A state leaseq never writes (edited by hand): dead-letter the
        -- job rather than leave it in no index at all.
        dead_letter(job, dead, K, log, id, now, 'damaged row: unknown state ' .. s,
          'damaged', row[2])
        died = died + 1
      elseif not s and redis.call('EXISTS', job) == 1 then
        dead_letter(job, dead, K, log, id, now, 'damaged row: state missing', 'damaged', row[2])
        died = died + 1
      end
    elseif deadline and deadline > now then
      -- The index drifted from the row; the row wins.
      redis.call('ZADD', active, deadline, id)
    else
      redis.call('ZREM', active, id)
      group_done(K, job)
      local attempts, max_attempts = to_count(row[2]), to_count(row[3])
      local err = 'lease expired (attempt ' .. (row[2] or 'missing') .. ', worker '
        .. (row[6] or '?') .. ')'
      bump_counter(K, 'expired', 1, now)
      local refunds = to_count(row[8]) or 0
      if attempts and max_attempts and row[7] == row[2] and refunds < max_refunds then
        -- A crash must not spend the attempt of a job that never started;
        -- attempts stays (the fencing token), max_attempts goes up instead.
        max_attempts = max_attempts + 1
        redis.call('HSET', job, 'max_attempts', max_attempts, 'refunds', refunds + 1)
        redis.call('HINCRBY', K.meta, 'refunded', 1)
        err = err .. '; it never reached a handler: attempt refunded ('
          .. (refunds + 1) .. ' of at most ' .. max_refunds .. ' refunds)'
      end
      if not attempts or not max_attempts then
        dead_letter(job, dead, K, log, id, now, err .. '; damaged row: attempts='
          .. (row[2] or 'missing') .. ' max_attempts=' .. (row[3] or 'missing'), 'active', row[2])
        died = died + 1
      elseif attempts >= max_attempts then
        dead_letter(job, dead, K, log, id, now, err .. '; no attempts left ('
          .. attempts .. ' of ' .. max_attempts .. ')', 'active', attempts)
        died = died + 1
      else
        note_failure(job, now, attempts, 'pending', err)
        redis.call('HDEL', job, 'lease_until', 'prefetched')
        push_pending(pending, K, job, id, to_count(row[5]) or 0)
        -- Waiting again: its start-by deadline is swept again (lib/expire_due.lua).
        if to_count(row[9]) then redis.call('ZADD', K.deadlines, row[9], id) end
        log_event(log, 'active', 'pending', id, attempts)
        requeued = requeued + 1
      end
    end
  end
  return requeued, died
end
