-- run_now.lua: make a scheduled or suspended job claimable now instead of at its due time.
-- transition: scheduled | suspended -> pending (a signal wait so ended counts as timed out)
-- clock: server TIME, read without moving the queue's floor, only to stamp the event-stream entry
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- KEYS[2]  leaseq:{<queue>}:meta       HASH  counters, seq
-- KEYS[3]  leaseq:{<queue>}:events     STREAM  job transitions (lib/flush_events.lua; docs/events.md)
-- KEYS[4]  leaseq:{<queue>}:waiters    ZSET  '<signal key> <id>' of every job waiting for a signal, score 0
-- ARGV[1]  id, the job id (string)
-- derives: leaseq:{<queue>}:group:<name>  ZSET  a fair group's ready ids (group_prefix)
-- returns: {'OK'}
-- errors: {'GONE'} for an unknown id; {'STATE', state} when the job is neither scheduled nor suspended;
--         {'PARKED', holder id} for a keep-last successor parked behind its key's holder
--!include lib/allow_oom.lua
--!include lib/check_ready.lua
--!include lib/check_type.lua
--!include lib/event_log.lua
--!include lib/flush_events.lua
--!include lib/now_ms.lua
--!include lib/parked.lua
--!include lib/resume_row.lua

local job, meta = K.job, K.meta
allow_oom(meta) -- a full server must still let this script run
local id = A.id
local row = redis.call('HMGET', job, 'state', 'priority', 'attempts', 'after')
if not row[1] then return { 'GONE' } end
if row[1] ~= 'scheduled' and row[1] ~= 'suspended' then return { 'STATE', row[1] } end
-- A keep-last successor waits for its key's holder to finish: run now, two jobs
-- of one key would run at once.
if row[1] == 'scheduled' and parked(K, id, row[4]) then return { 'PARKED', row[4] } end
if row[1] == 'suspended' then check_type(K.waiters, 'zset') end -- before any write
check_ready(K)
-- A sleep is already recorded; a wait for a signal ends as if its time ran out.
local log = event_log(K.events, nil, meta)
resume_row(K, job, id, row[1], row[2], row[3], log, '')
if log.n > 0 then flush_events(log, now_ms(meta, true)) end
return { 'OK' }
