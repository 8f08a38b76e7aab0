-- read_row(job, ...): the given fields of a job row (HMGET), or nil when the
-- key holds another type (overwritten by hand). A plain HMGET would raise
-- WRONGTYPE, and a script that stops half way keeps what it already wrote --
-- say the ids its ZPOPMIN took, orphaning every healthy job of that batch.
local function read_row(job, ...)
  local row = redis.pcall('HMGET', job, ...)
  if row['err'] then return nil end
  return row
end
