-- enqueue.lua: create jobs, one or many in one call; an existing id is left alone.
-- transition: (none) -> pending | scheduled
-- clock: server TIME, for enqueued_at and the due time of delayed jobs
-- KEYS[1]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[2]  leaseq:{<queue>}:scheduled  ZSET  ids waiting, score = due ms epoch
-- KEYS[3]  leaseq:{<queue>}:meta       HASH  counters, next_id, seq
-- KEYS[4]  leaseq:{<queue>}:wake       LIST  wake-up tokens for blocked claimers
-- ARGV[1]  job key prefix, 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  n, the number of jobs that follow (integer >= 1)
-- ARGV[3..] five values per job: id ('' = let the server number it),
--           payload (bytes, already encoded and size-checked),
--           max_attempts (integer >= 1), delay_ms (integer >= 0, 0 = now),
--           priority (integer 0..1000000, lower runs first)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the job row
-- returns: flat array, per job: id, 1 if created or 0 if the id existed
-- errors: none of its own (input was validated by the caller)
--!include lib/now_ms.lua
--!include lib/push_pending.lua
--!include lib/wake_if_first.lua

local pending, scheduled, meta, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local job_prefix = ARGV[1]
local n = tonumber(ARGV[2])
local now = now_ms()
local out = {}
local created = 0

-- The server-numbered ids of the whole call come from one HINCRBY (a
-- per-job HINCRBY cost a fifth of the script's time).
local auto = 0
for i = 0, n - 1 do
  if ARGV[3 + i * 5] == '' then auto = auto + 1 end
end
local next_id, reserved = 0, 0
if auto > 0 then
  next_id = redis.call('HINCRBY', meta, 'next_id', auto) - auto
  reserved = auto
end

for i = 0, n - 1 do
  local base = 3 + i * 5
  local id = ARGV[base]
  local payload = ARGV[base + 1]
  local max_attempts = ARGV[base + 2]
  local delay_ms = tonumber(ARGV[base + 3])
  local priority = tonumber(ARGV[base + 4])
  local job
  if id == '' then
    -- Skip any number a caller already used as an id (then take one more).
    repeat
      if reserved > 0 then
        next_id, reserved = next_id + 1, reserved - 1
      else
        next_id = redis.call('HINCRBY', meta, 'next_id', 1)
      end
      id = tostring(next_id)
      job = job_prefix .. id
    until redis.call('EXISTS', job) == 0
  elseif redis.call('EXISTS', job_prefix .. id) == 0 then
    job = job_prefix .. id
  end
  -- Dedup: an existing row, whatever its state (even succeeded or dead),
  -- leaves job nil and changes nothing. The row is written by one HSET.
  if job then
    if delay_ms > 0 then
      redis.call('HSET', job, 'state', 'scheduled', 'attempts', 0, 'max_attempts', max_attempts,
        'payload', payload, 'priority', priority, 'enqueued_at', now, 'run_at', now + delay_ms)
      redis.call('ZADD', scheduled, now + delay_ms, id)
      wake_if_first(scheduled, wake, id)
    else
      redis.call('HSET', job, 'state', 'pending', 'attempts', 0, 'max_attempts', max_attempts,
        'payload', payload, 'priority', priority, 'enqueued_at', now)
      push_pending(pending, meta, wake, job, id, priority)
    end
    created = created + 1
    out[#out + 1] = id
    out[#out + 1] = 1
  else
    out[#out + 1] = id
    out[#out + 1] = 0
  end
end
if created > 0 then
  redis.call('HINCRBY', meta, 'enqueued', created)
end
return out
