-- hold_results.lua: hold the rows a producer waits on (wait, wait_many) against the count bound until a deadline.
-- transition: none for jobs (sets the field waited_until of each row that exists; no state changes)
-- clock: server TIME via now_ms (read only: the floor is not moved), for the deadline
-- flags: allow-oom (it frees memory or writes a few bytes: a full server still runs it)
-- KEYS[1]  leaseq:{<queue>}:meta  HASH  the queue's clock floor (field clock)
-- ARGV[1]  job_prefix, the job key prefix 'leaseq:{<queue>}:job:' (string), for the rows held
-- ARGV[2]  hold_ms, how long from now the rows are held (integer ms >= 0)
-- ARGV[3..] ids, the job ids waited on (strings, at most 1000 a call)
-- derives: leaseq:{<queue>}:job:<id>  HASH  each id's row (job_prefix)
-- returns: per id looked at, in order: 1 if its row exists (then held until now + hold_ms, or
--          later where another waiter holds it longer), 0 if no row has the id (or the key is
--          not a hash); fewer replies than ids when the call stopped at its time budget
--          (lib/over_budget.lua): the ids past the last reply were not looked at
-- errors: none
--!include lib/allow_oom.lua
--!include lib/elapsed_us.lua
--!include lib/now_ms.lua
--!include lib/over_budget.lua

local started_us = elapsed_us()
allow_oom(K.meta) -- a producer on a full server can still read its results
local deadline = now_ms(K.meta, true) + tonumber(A.hold_ms)
local out = {}
for i = TAIL.args, #ARGV do
  -- The budget is looked at every 32 rows; the first 32 are always done.
  if (i - TAIL.args) % 32 == 0 and i > TAIL.args and over_budget(started_us) then break end
  local job = A.job_prefix .. ARGV[i]
  -- pcall: a key of another type (damaged by hand) is no row to hold.
  local row = redis.pcall('HMGET', job, 'state', 'waited_until')
  if row['err'] or not row[1] then
    out[#out + 1] = 0
  else
    -- Later only: a second waiter with a shorter timeout never cuts the first's hold.
    if (tonumber(row[2]) or 0) < deadline then
      redis.call('HSET', job, 'waited_until', deadline)
    end
    out[#out + 1] = 1
  end
end
return out
