-- wake_if_first(scheduled, wake, id): call right after adding id to scheduled.
-- A blocked claimer sleeps until the earliest due time it last saw; when id is
-- now the earliest, leave a wake-up token (capped at 64, as push_pending does)
-- so one sleeper re-plans instead of oversleeping by up to its 5 s cap.
local function wake_if_first(scheduled, wake, id)
  if redis.call('ZRANGE', scheduled, 0, 0)[1] == id and redis.call('LLEN', wake) < 64 then
    redis.call('RPUSH', wake, '1')
  end
end
