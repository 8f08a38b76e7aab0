-- expire_due(K, job_prefix, now, limit, log): the start-by deadlines (enqueue's expires=)
-- that have passed, at most limit of them: a job still pending or scheduled at its
-- deadline is never run: it is dead-lettered (its uniqueness key freed, its children
-- settled as a dead parent's: lib/dead_letter.lua) with last_error saying so and
-- when, and counted (meta past_deadline). Its entry leaves the index either way: a
-- job that has started (active, suspended) or finished owes the deadline nothing
-- more, and one waiting for its parents is checked when a claim picks it up
-- (lease_one: the row's expires_at), as is a retry that falls due past it.
-- Returns how many index entries it took (dead-lettered or not: fewer than limit
-- when no more have passed), and how many of their jobs it dead-lettered.
-- KEYS  leaseq:{<queue>}:deadlines  ZSET  ids with a start-by deadline, score = the deadline, ms epoch
-- KEYS  leaseq:{<queue>}:scheduled  ZSET  ids waiting, score = due ms epoch
-- KEYS  leaseq:{<queue>}:dead       ZSET  dead ids, score = died ms epoch
-- ARGV  group_prefix, 'leaseq:{<queue>}:group:' (string): a fair group's ready ids are the ZSET group_prefix .. <name>
--!include lib/bump_counter.lua
--!include lib/call_chunked.lua
--!include lib/dead_letter.lua
--!include lib/deadline_text.lua
--!include lib/unready.lua
local function expire_due(K, job_prefix, now, limit, log)
  local due = redis.call('ZRANGEBYSCORE', K.deadlines, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  if #due == 0 then return 0, 0 end
  local ids, died = {}, 0
  for i = 1, #due, 2 do
    local id = due[i]
    ids[#ids + 1] = id
    local job = job_prefix .. id
    local row = redis.pcall('HMGET', job, 'state', 'attempts', 'group', 'expires_at')
    local state = not row['err'] and row[1]
    if (state == 'pending' or state == 'scheduled') and row[4] == due[i + 1] then
      unready(K, id, state)
      redis.call('ZREM', K.scheduled, id)
      if row[3] then redis.call('ZREM', K.group_prefix .. row[3], id) end
      dead_letter(job, K.dead, K, log, id, now, deadline_text(row[4]), state, row[2])
      died = died + 1
    end
  end
  call_chunked('ZREM', K.deadlines, ids, 1000)
  if died > 0 then bump_counter(K, 'past_deadline', died, now) end
  return #ids, died
end
