-- wake_if_first(scheduled, wake, due): call right after adding jobs due at
-- due (ms epoch) to scheduled. A blocked claimer sleeps until the earliest
-- due time it last saw; when nothing is due sooner than these jobs, leave a
-- wake-up token (capped at 64, as push_pending does) so one sleeper
-- re-plans instead of oversleeping by up to its 5 s cap.
local function wake_if_first(scheduled, wake, due)
  local head = redis.call('ZRANGE', scheduled, 0, 0, 'WITHSCORES')
  if tonumber(head[2]) >= due and redis.call('LLEN', wake) < 64 then
    redis.call('RPUSH', wake, '1')
  end
end
