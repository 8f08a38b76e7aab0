-- dead_letter(job, dead, K, log, id, now, err, from, attempt, tb): park a job in
-- the dead set, err and tb (optional traceback) written by note_failure. The
-- caller has already removed the id from the index it came from. Dead rows are kept until an operator retries or purges them: never trimmed.
-- log is the call's event_log: the transition from -> dead (attempt: the row's
-- attempts) is noted there, and waiters are signalled on its done stream. Its
-- children in workflows are settled in the same call (job_finished: K holds the
-- keys it needs).
--!include lib/bump_counter.lua
--!include lib/free_unique.lua
--!include lib/job_finished.lua
--!include lib/log_event.lua
--!include lib/note_failure.lua
--!include lib/signal_done.lua
local function dead_letter(job, dead, K, log, id, now, err, from, attempt, tb)
  note_failure(job, now, attempt, 'dead', err, tb)
  redis.call('HSET', job, 'state', 'dead', 'finished_at', now)
  redis.call('HDEL', job, 'lease_until', 'run_at', 'prefetched')
  redis.call('ZADD', dead, now, id)
  free_unique(K, job, id, now)
  bump_counter(K, 'dead', 1, now)
  signal_done(log.done, id)
  log_event(log, from, 'dead', id, attempt)
  job_finished(K, id, job, 'dead', now, log)
end
