-- once.lua: set a named idempotency marker in the job row; true the first time only.
-- transition: active -> active (adds the field once:<name>)
-- clock: none
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- ARGV[1]  token, the lease's attempts value (decimal string)
-- ARGV[2]  incarnation, the lease's row incarnation (decimal string)
-- ARGV[3]  fence, the lease's fence (its claiming call's random name, string)
-- ARGV[4]  name, the marker's name (string); stored as field 'once:<name>' = token
-- derives: nothing
-- returns: {'OK', 1} the first time for this job and name, {'OK', 0} after that
-- errors: {'LOST', state, attempts, incarnation, fence} when the lease is not held under token, incarnation and fence
--!include lib/allow_oom.lua
--!include lib/lease_check.lua

local job = K.job
allow_oom(job) -- a full server must still let this script drain the queue
local refused = lease_check(job, A.token, A.incarnation, A.fence)
if refused then return refused end
-- The marker lives in the row itself, so it lasts exactly as long as the job.
return { 'OK', redis.call('HSETNX', job, 'once:' .. A.name, A.token) }
