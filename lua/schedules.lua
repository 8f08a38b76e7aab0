-- schedules.lua: read schedules (the due ones, a page of all, or some by name), read-only.
-- transition: none (reads only)
-- clock: server TIME (never behind the queue's meta clock), to tell which schedules are due
-- flags: none (it adds work: a full server refuses it whole, before it writes)
-- KEYS[1]  leaseq:{<queue>}:schedules  ZSET  schedule names, score = next due ms epoch
-- KEYS[2]  leaseq:{<queue>}:meta       HASH  the queue's clock floor
-- ARGV[1]  schedule_prefix, the schedule key prefix 'leaseq:{<queue>}:schedule:' (string)
-- ARGV[2]  what, 'due' (next due <= now), 'all' (by next due) or 'names' (ARGV[5..])
-- ARGV[3]  offset, into the index for 'due' and 'all' (integer >= 0)
-- ARGV[4]  limit, most schedules read (integer >= 1; fewer once the call has worked its
--          time budget: lib/over_budget.lua)
-- ARGV[5..] names, to read, for 'names' (strings)
-- derives: leaseq:{<queue>}:schedule:<name>  HASH  each schedule read
-- returns: flat array: now_ms, total (for 'due' the schedules due now, else all schedules),
--          then per schedule: name and its HGETALL as a nested array (empty if the schedule
--          does not exist); fewer than limit (or than the names) when the call stopped at
--          its time budget: page on from offset + those returned
-- errors: none
--!include lib/elapsed_us.lua
--!include lib/now_ms.lua
--!include lib/over_budget.lua

local started_us = elapsed_us()
local index, meta = K.schedules, K.meta
local prefix, what = A.schedule_prefix, A.what
local offset, limit = tonumber(A.offset), tonumber(A.limit)
local now = now_ms(meta, true)
local names
if what == 'names' then
  names = {}
  for i = TAIL.args, #ARGV do names[#names + 1] = ARGV[i] end
elseif what == 'due' then
  names = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', offset, limit)
else
  names = redis.call('ZRANGE', index, offset, offset + limit - 1)
end
local total
if what == 'due' then
  total = redis.call('ZCOUNT', index, '-inf', now)
else
  total = redis.call('ZCARD', index)
end
-- In pages of PAGE schedules while the time budget lasts (over_budget; one page
-- at least): a schedule's hash is a dozen fields or more.
local PAGE = 16
local out = { now, total }
for i, name in ipairs(names) do
  out[#out + 1] = name
  local ok, fields = pcall(redis.call, 'HGETALL', prefix .. name)
  out[#out + 1] = ok and fields or {} -- a key of another type reads as absent
  if i % PAGE == 0 and i < #names and over_budget(started_us) then break end
end
return out
