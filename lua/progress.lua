-- progress.lua: store a handler's progress report in the job row, under its lease.
-- transition: active -> active (sets the field progress)
-- clock: none
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:job:<id>   HASH  the job row
-- ARGV[1]  token, the lease's attempts value (decimal string)
-- ARGV[2]  incarnation, the lease's row incarnation (decimal string)
-- ARGV[3]  fence, the lease's fence (its claiming call's random name, string)
-- ARGV[4]  value, the progress as JSON text (at most 4096 bytes, checked by the caller)
-- derives: nothing
-- returns: {'OK'}
-- errors: {'LOST', state, attempts, incarnation, fence} when the lease is not held under token, incarnation and fence
--!include lib/allow_oom.lua
--!include lib/lease_check.lua

local job = K.job
allow_oom(job) -- a small write of a running job, like once and extend
local refused = lease_check(job, A.token, A.incarnation, A.fence)
if refused then return refused end
redis.call('HSET', job, 'progress', A.value)
return { 'OK' }
