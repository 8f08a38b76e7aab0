-- retain(job, index, id, now, keep_ms): keep a finished (succeeded or
-- cancelled) row for keep_ms, then let it go. keep_ms = 0 deletes it now;
-- keep_ms < 0 keeps it until purged. The row carries its own PEXPIRE so
-- memory is freed even if the queue goes idle; the index score is the
-- moment the row expires and trim_finished() drops the entry lazily.
local function retain(job, index, id, now, keep_ms)
  if keep_ms == 0 then
    redis.call('DEL', job)
  elseif keep_ms < 0 then
    redis.call('ZADD', index, '+inf', id)
  else
    redis.call('PEXPIRE', job, keep_ms)
    redis.call('ZADD', index, now + keep_ms, id)
  end
end
