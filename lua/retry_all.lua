-- retry_all.lua: retry one page of the dead jobs that died before a retry-all run began.
-- transition: dead -> pending (a page of at most limit jobs; the caller pages on)
-- clock: server TIME, read without moving the queue's floor, only to stamp the event-stream entry
--        (the snapshot is the dead set's highest score at the first page)
-- KEYS[1]  leaseq:{<queue>}:dead       ZSET  dead ids, score = died ms epoch
-- KEYS[2]  leaseq:{<queue>}:pending    ZSET  ids ready to claim
-- KEYS[3]  leaseq:{<queue>}:meta       HASH  counters, seq
-- KEYS[4]  leaseq:{<queue>}:wake       LIST  wake-up tokens
-- KEYS[5]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/design.md)
-- ARGV[1]  job key prefix, 'leaseq:{<queue>}:job:' (string)
-- ARGV[2]  extra, attempts to grant on top of those already used (integer >= 1)
-- ARGV[3]  limit, the most dead-set entries to look at (integer >= 1)
-- ARGV[4]  op, this run's id (string), stored as retry_op in every row it retries
-- ARGV[5]  upto, the snapshot's highest score (a score string; '' on the first page: take it now)
-- ARGV[6]  after, the cursor's score (a score string; '-inf' on the first page)
-- ARGV[7]  skip, entries at the cursor's score this run stepped over (integer >= 0)
-- derives: leaseq:{<queue>}:job:<id>  HASH  the dead rows
-- returns: flat array: retried, more (1 if the page was full), upto, the next cursor's score
--          and skip, then id, field, value triples of the jobs stepped over as damaged
-- errors: none; a damaged row is reported and stays dead
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/now_ms.lua
--!include lib/retry_row.lua

local dead, pending, meta, wake = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local job_prefix, extra, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local op, upto, after, skip = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7])
if upto == '' then
  -- The snapshot: jobs that die from now on score at least this, and the
  -- run stops here. One that dies again in this very millisecond is told
  -- apart by retry_op.
  local last = redis.call('ZRANGE', dead, -1, -1, 'WITHSCORES')
  if #last == 0 then return { 0, 0, '', after, skip } end
  upto = last[2]
end
-- Retried entries leave the set; the ones stepped over stay, and they are
-- the first skip entries at the cursor's score.
local page = redis.call('ZRANGEBYSCORE', dead, after, upto, 'WITHSCORES', 'LIMIT', skip, limit)
local retried, damaged = 0, {}
local log = event_log(KEYS[5], nil, meta)
for i = 1, #page, 2 do
  local id, score = page[i], page[i + 1]
  local reply = retry_row(job_prefix .. id, dead, pending, meta, wake, id, extra, op, log)
  if score ~= after then
    after, skip = score, 0
  end
  if reply[1] == 'OK' then
    retried = retried + 1
  elseif reply[1] == 'DAMAGED' or reply[1] == 'SKIP' then
    skip = skip + 1
    if reply[1] == 'DAMAGED' then
      damaged[#damaged + 1] = id
      damaged[#damaged + 1] = reply[2]
      damaged[#damaged + 1] = reply[3]
    end
  end
end
if log.n > 0 then flush_events(log, now_ms(meta, true)) end
local out = { retried, #page == 2 * limit and 1 or 0, upto, after, skip }
for i = 1, #damaged do out[#out + 1] = damaged[i] end
return out
