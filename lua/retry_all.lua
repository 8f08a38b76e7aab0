-- retry_all.lua: retry one page of the dead jobs that died before a retry-all run began.
-- transition: dead -> pending (a page of at most limit jobs; the caller pages on)
-- clock: server TIME, read without moving the queue's floor, only to stamp the event-stream entry
--        (the snapshot is the dead set's highest score at the first page)
-- flags: none (it adds work: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:dead       ZSET  dead ids, score = died ms epoch
-- KEYS[2]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[3]  leaseq:{<queue>}:meta       HASH  counters, seq
-- KEYS[4]  leaseq:{<queue>}:wake       LIST  wake-up tokens
-- KEYS[5]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
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
--!include lib/elapsed_us.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/now_ms.lua
--!include lib/over_budget.lua
--!include lib/retry_row.lua

local started_us = elapsed_us()
local dead, pending, meta, wake = K.dead, K.pending, K.meta, K.wake
local job_prefix, extra, limit = A.job_prefix, tonumber(A.extra), tonumber(A.limit)
local op, upto, after, skip = A.op, A.upto, A.after, tonumber(A.skip)
if upto == '' then
  -- The snapshot: jobs that die from now on score at least this, and the
  -- run stops here. One that dies again in this very millisecond is told
  -- apart by retry_op.
  local last = redis.call('ZRANGE', dead, -1, -1, 'WITHSCORES')
  if #last == 0 then return { 0, 0, '', after, skip } end
  upto = last[2]
end
-- Retried entries leave the set; the ones stepped over stay, and they are
-- the first skip entries at the cursor's score. In pages of PAGE entries, up to
-- limit, while the time budget lasts (over_budget; one page at least).
local PAGE = 8
local retried, damaged, looked, more = 0, {}, 0, 1
local log = event_log(K.events, nil, meta)
while looked < limit do
  local want = math.min(PAGE, limit - looked)
  local page = redis.call('ZRANGEBYSCORE', dead, after, upto, 'WITHSCORES', 'LIMIT', skip, want)
  for i = 1, #page, 2 do
    local id, score = page[i], page[i + 1]
    local reply = retry_row(job_prefix .. id, dead, pending, K, id, extra, op, log)
    if score ~= after then
      after, skip = score, 0
    end
    if reply[1] == 'OK' then
      retried = retried + 1
    elseif reply[1] == 'DAMAGED' or reply[1] == 'SKIP' or reply[1] == 'SETTLING' then
      skip = skip + 1
      if reply[1] == 'DAMAGED' then
        damaged[#damaged + 1] = id
        damaged[#damaged + 1] = reply[2]
        damaged[#damaged + 1] = reply[3]
      end
    end
  end
  looked = looked + #page / 2
  if #page < 2 * want then
    more = 0 -- the snapshot's last entry is behind the cursor
    break
  end
  if over_budget(started_us) then break end
end
if log.n > 0 then flush_events(log, now_ms(meta, true)) end
local out = { retried, more, upto, after, skip }
for i = 1, #damaged do out[#out + 1] = damaged[i] end
return out
