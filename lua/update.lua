-- update.lua: replace the payload of a job that has not started; the old payload goes to the event stream.
-- transition: none (a waiting, pending or scheduled job keeps its state)
-- clock: server TIME, read without moving the queue's floor, only to stamp the event-stream entry
-- flags: none (it may grow a row: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- KEYS[2]  leaseq:{<queue>}:meta       HASH  the event switch (fields events, events_maxlen), clock
-- ARGV[1]  id, the job id (string)
-- ARGV[2]  payload, the new payload (bytes, encoded and size-checked by the caller)
-- derives: nothing
-- returns: {'OK'}
-- errors: {'GONE'} for an unknown id; {'STATE', state} once the job has started or finished;
--         {'DAMAGED', '<key>', 'not a hash'} when the job key holds another type
--!include lib/log_edit.lua
--!include lib/now_ms.lua
--!include lib/state_kind.lua

local job = K.job
local row = redis.pcall('HMGET', job, 'state', 'attempts', 'payload')
if row['err'] then return { 'DAMAGED', '<key>', 'not a hash' } end
local state = row[1]
if not state then return { 'GONE' } end
-- Not started: every unfinished state but active (a held lease).
if state == 'active' or state_kind(state) ~= 'unfinished' then return { 'STATE', state } end
redis.call('HSET', job, 'payload', A.payload)
log_edit(K, 'updated', A.id, state, row[2], row[3], now_ms(K.meta, true))
return { 'OK' }
