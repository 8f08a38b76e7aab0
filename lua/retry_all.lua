-- retry_all.lua: retry one page of the dead jobs that died before a retry-all run began.
-- transition: dead -> pending (a page of at most limit jobs; the caller pages on)
-- clock: server TIME, read without moving the queue's floor, only to stamp the event-stream entry
--        (the snapshot is the dead set's highest score at the first page)
-- flags: none (it adds work: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:dead       ZSET  dead ids, score = died ms epoch
-- KEYS[2]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[3]  leaseq:{<queue>}:meta       HASH  counters, seq
-- KEYS[4]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- ARGV[1]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  extra, attempts to grant on top of those already used (integer >= 1)
-- ARGV[3]  limit, the most dead-set entries to look at (integer >= 1; fewer once the call
--          has worked its time budget: lib/over_budget.lua)
-- ARGV[4]  op, this run's id (string), stored as retry_op in every row it retries
-- ARGV[5]  upto, the snapshot's highest score (a score string; '' on the first page: take it now)
-- ARGV[6]  after, the cursor's score (a score string; '-inf' on the first page)
-- ARGV[7]  skip, entries at the cursor's score this run stepped over (integer >= 0)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the dead rows and their parents (job_prefix);
--          leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix)
-- returns: flat array: retried, more (1 unless the snapshot's last entry was reached: after a
--          full page, or one cut short at the time budget), upto, the next cursor's score
--          and skip, then id, field, value triples of the jobs stepped over as damaged
-- errors: none; a damaged row is reported and stays dead
--!include lib/check_ready.lua
--!include lib/elapsed_us.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/now_ms.lua
--!include lib/retry_row.lua
--!include lib/snapshot_pages.lua

local started_us = elapsed_us()
local dead, pending, meta = K.dead, K.pending, K.meta
check_ready(K) -- before any write
local job_prefix, extra, op = A.job_prefix, tonumber(A.extra), A.op
-- The snapshot: jobs that die from now on score above its upto, and the run
-- stops there. One that dies again in this very millisecond is told apart by
-- retry_op. Retried entries leave the set; the ones stepped over stay.
local cursor = { upto = A.upto, after = A.after, skip = tonumber(A.skip) }
local retried, damaged = 0, {}
local log = event_log(K.events, nil, meta)
local more = snapshot_pages(dead, cursor, tonumber(A.limit), 8, started_us, function(id)
  local reply = retry_row(job_prefix .. id, dead, pending, K, id, extra, op, log)
  if reply[1] == 'OK' then
    retried = retried + 1
    return false
  end
  if reply[1] == 'DAMAGED' then
    damaged[#damaged + 1] = id
    damaged[#damaged + 1] = reply[2]
    damaged[#damaged + 1] = reply[3]
  end
  return reply[1] == 'DAMAGED' or reply[1] == 'SKIP' or reply[1] == 'SETTLING'
end)
if log.n > 0 then flush_events(log, now_ms(meta, true)) end
local out = { retried, more, cursor.upto, cursor.after, cursor.skip }
for i = 1, #damaged do out[#out + 1] = damaged[i] end
return out
