-- unschedule.lua: remove a schedule; the jobs it already made are left alone.
-- transition: none (schedules are not jobs)
-- clock: none
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:schedules        ZSET  schedule names, score = next due ms epoch
-- KEYS[2]  leaseq:{<queue>}:schedule:<name>  HASH  this schedule
-- ARGV[1]  name, the schedule's name (string)
-- derives: nothing
-- returns: 1 if the schedule existed, 0 if not
-- errors: none
local removed = redis.call('ZREM', K.schedules, A.name)
local deleted = redis.call('DEL', K.schedule)
if removed + deleted > 0 then return 1 end
return 0
