-- retain_rows(jobs, ids, index, now, keep_ms): keep finished (succeeded or
-- cancelled) rows for keep_ms, then let them go. jobs[i] is the row key of
-- ids[i]. keep_ms = 0 deletes them now; keep_ms < 0 keeps them until
-- purged, scored 10^15 + now: after every real expiry time (a trim by time
-- never reaches them) yet still in the order they finished, so a count
-- bound (trim_count) drops the oldest first. Each row carries its own PEXPIRE so memory is freed even if the
-- queue goes idle; the index score is the moment the row expires and
-- trim_finished() drops the entry lazily. One DEL or ZADD per 1000 rows
-- serves the batch.
--!include lib/call_chunked.lua
local function retain_rows(jobs, ids, index, now, keep_ms)
  if #ids == 0 then return end
  if keep_ms == 0 then
    call_chunked('DEL', nil, jobs, 1000)
    return
  end
  local score = 1000000000000000 + now
  if keep_ms > 0 then
    score = now + keep_ms
    for _, job in ipairs(jobs) do redis.call('PEXPIRE', job, keep_ms) end
  end
  local members = {}
  for i, id in ipairs(ids) do
    members[2 * i - 1] = score
    members[2 * i] = id
  end
  call_chunked('ZADD', index, members, 1000)
end
