-- schedule.lua: create or change a schedule (upsert), if nobody changed it since it was read.
-- transition: none (schedules are not jobs; tick.lua turns their due times into jobs)
-- clock: server TIME (never behind the queue's meta clock), to keep a due time that has already come
-- flags: none (it adds work: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:schedules        ZSET  schedule names, score = next due ms epoch
-- KEYS[2]  leaseq:{<queue>}:schedule:<name>  HASH  this schedule
-- KEYS[3]  leaseq:{<queue>}:meta             HASH  the queue's clock floor
-- ARGV[1]  name, the schedule's name (string, the queue-name rule)
-- ARGV[2]  payload, of each job it makes (bytes, encoded and size-checked)
-- ARGV[3]  cron, the cron expression ('' for an interval schedule)
-- ARGV[4]  tz, the time zone of the cron expression (IANA name, '' for UTC)
-- ARGV[5]  every_ms, the interval (integer ms >= 1; 0 for a cron schedule)
-- ARGV[6]  max_attempts, of each job it makes (integer >= 1)
-- ARGV[7]  priority, of each job it makes (integer 0..1000000)
-- ARGV[8]  next_due, the next due time under the new definition (integer ms epoch, computed by the
--          client from the definition and the clock read by schedules.lua)
-- ARGV[9]  stamp, the stamp read (version:last_fired, '' if it did not exist): the compare in compare-and-set
-- ARGV[10] created_at, to store for a new schedule (integer ms epoch, the clock read)
-- ARGV[11]  kind, of each job it makes ('' = none)
-- ARGV[12]  group, of each job it makes (a fair group's name; '' = none)
-- ARGV[13]  timeout_ms, of each job it makes (integer ms; 0 = none)
-- ARGV[14]  unique, the uniqueness key of each job it makes ('' = none): a due time is
--           skipped while the key's holder is unfinished (tick.lua)
-- ARGV[15]  cost, of each job it makes (decimal text; '' = the default, 1)
-- ARGV[16]  expires, the start-by deadline of each job it makes ('' = none; '+<ms>': that long
--           after the job is made), stored as expires_ms
-- derives: nothing
-- returns: {'OK', next due (ms epoch), version} or {'STALE'} when the stamp differs
--          (changed or fired since the read: read again and retry)
-- errors: none of its own (input was validated by the caller)
--!include lib/now_ms.lua

local index, key, meta = K.schedules, K.schedule, K.meta
local now = now_ms(meta)
local row = {}
if redis.call('TYPE', key).ok == 'hash' then
  row = redis.call('HMGET', key, 'version', 'last_fired', 'next_due', 'created_at', 'fired')
end
local stamp = ''
if row[1] then stamp = row[1] .. ':' .. (row[2] or '') end
if stamp ~= A.stamp then return { 'STALE' } end
local next_due = tonumber(A.next_due)
local current = tonumber(row[3] or '')
-- A due time that has come but that no tick has turned into a job yet is
-- kept: changing a schedule never skips a tick that was already due.
if current and current <= now then next_due = current end
local version = (tonumber(row[1] or '') or 0) + 1
-- Rewrite the whole hash (a key of another type, or fields of an older
-- definition, go), keeping the history: created_at, last_fired, fired.
redis.call('DEL', key)
redis.call('HSET', key, 'payload', A.payload, 'cron', A.cron, 'tz', A.tz,
  'every_ms', A.every_ms, 'max_attempts', A.max_attempts, 'priority', A.priority,
  'next_due', next_due, 'version', version, 'updated_at', now,
  'created_at', row[4] or A.created_at, 'fired', row[5] or 0)
if row[2] then redis.call('HSET', key, 'last_fired', row[2]) end
-- The other job options, stored only when given (as in a job row).
if A.kind ~= '' then redis.call('HSET', key, 'kind', A.kind) end
if A.group ~= '' then redis.call('HSET', key, 'group', A.group) end
if A.timeout_ms ~= '0' then redis.call('HSET', key, 'timeout_ms', A.timeout_ms) end
if A.unique ~= '' then redis.call('HSET', key, 'unique', A.unique) end
if A.cost ~= '' then redis.call('HSET', key, 'cost', A.cost) end
if A.expires ~= '' then redis.call('HSET', key, 'expires_ms', string.sub(A.expires, 2)) end
redis.call('ZADD', index, next_due, A.name)
return { 'OK', next_due, version }
