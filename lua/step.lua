-- step.lua: record a durable step's result in the job row, under its lease; the first record stands.
-- transition: active -> active (adds the field step:<name>)
-- clock: none
-- flags: none (it may grow a row: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- ARGV[1]  token, the lease's attempts value (decimal string)
-- ARGV[2]  incarnation, the lease's row incarnation (decimal string)
-- ARGV[3]  fence, the lease's fence (its claiming call's random name, string)
-- ARGV[4]  name, the step's name (string); stored as field 'step:<name>'
-- ARGV[5]  value, the step's result, encoded by the queue's codec (bytes)
-- derives: nothing
-- returns: {'OK', 1} when recorded now, {'OK', 0, stored} when the name was recorded before (that record stands)
-- errors: {'LOST', state, attempts, incarnation, fence} when the lease is not held under token, incarnation and fence
--!include lib/lease_check.lua

local job = K.job
local refused = lease_check(job, A.token, A.incarnation, A.fence)
if refused then return refused end
-- In the row itself, like once markers: a step lasts exactly as long as its job.
local field = 'step:' .. A.name
if redis.call('HSETNX', job, field, A.value) == 1 then return { 'OK', 1 } end
return { 'OK', 0, redis.call('HGET', job, field) }
