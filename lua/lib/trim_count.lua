-- trim_count(index, job_prefix, state, keep, limit, now): while index holds more
-- than keep entries, delete the rows of the oldest (lowest score: the first to
-- expire), at most limit per call -- O(1) amortised when each caller that
-- adds k entries passes limit >= k. An entry whose row is gone, or now holds
-- another state (the id was enqueued again), only loses its index entry. A row
-- pinned by children that have not finished (field children: docs/workflows.md)
-- or held by a producer waiting on it (field waited_until, ms epoch, later
-- than now, the caller's clock reading: lua/hold_results.lua) is stepped over
-- and keeps its entry. keep < 0: no bound. Returns how many entries went.
--!include lib/call_chunked.lua
local function trim_count(index, job_prefix, state, keep, limit, now)
  if keep < 0 or limit < 1 then return 0 end
  local excess = redis.call('ZCARD', index) - keep
  if excess <= 0 then return 0 end
  local ids = redis.call('ZRANGE', index, 0, math.min(excess, limit) - 1)
  local rows, gone = {}, {}
  for _, id in ipairs(ids) do
    local job = job_prefix .. id
    local s = redis.pcall('HMGET', job, 'state', 'children', 'waited_until')
    local held = (tonumber(s[3]) or 0) > now
    if s[1] ~= state then
      gone[#gone + 1] = id
    elseif not s[2] and not held then
      rows[#rows + 1] = job
      gone[#gone + 1] = id
    end
  end
  call_chunked('DEL', nil, rows, 1000)
  call_chunked('ZREM', index, gone, 1000)
  return #gone
end
