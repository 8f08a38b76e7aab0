-- lease_check(job, token, incarnation): nil while the row is 'active' under
-- this token and row number (lib/row_number.lua) (the lease holds, even past its deadline if no
-- reaper took it yet), else the refusal to return:
-- {'LOST', state, attempts, number} ('' for a missing row or field).
-- Tokens and numbers compare as strings, so a hand-damaged attempts never matches.
-- A second value, when the lease holds: the row's fair group, or false for
-- none (read in the same HMGET, so group_done need not read it again); a
-- third: the row's workflow links { depends_on, children } for job_finished; a
-- fourth: its uniqueness fields { unique_key, unique_next } for free_unique
-- (one HMGET per item on the complete path, not three).
--!include lib/row_number.lua
local function lease_check(job, token, incarnation)
  local row = redis.pcall('HMGET', job, 'state', 'attempts', 'incarnation', 'group',
    'depends_on', 'children', 'enqueued_at', 'unique_key', 'unique_next')
  if row['err'] then return { 'LOST', '', '', '' } end -- not a hash any more
  local number = row_number(row[3], row[7])
  if row[1] == 'active' and row[2] == token and number == incarnation then
    return nil, row[4], { row[5], row[6] }, { row[8], row[9] }
  end
  return { 'LOST', row[1] or '', row[2] or '', row[1] and number or '' }
end
