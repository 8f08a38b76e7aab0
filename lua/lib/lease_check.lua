-- lease_check(job, token, incarnation): nil while the row is 'active' under
-- this token and incarnation (the lease holds, even past its deadline if no
-- reaper took it yet), else the refusal to return:
-- {'LOST', state, attempts, incarnation} ('' for a missing row or field).
-- Tokens compare as strings, so a hand-damaged attempts never matches. A row
-- written before incarnations existed has none: it reads as '0', the value
-- such a row's leases carry, while every newer row has 1 or more.
-- A second value, when the lease holds: the row's fair group, or false for
-- none (read in the same HMGET, so group_done need not read it again); a
-- third: the row's workflow links { depends_on, children } for job_finished.
local function lease_check(job, token, incarnation)
  local row = redis.pcall('HMGET', job, 'state', 'attempts', 'incarnation', 'group',
    'depends_on', 'children')
  if row['err'] then return { 'LOST', '', '', '' } end -- not a hash any more
  if row[1] == 'active' and row[2] == token and (row[3] or '0') == incarnation then
    return nil, row[4], { row[5], row[6] }
  end
  return { 'LOST', row[1] or '', row[2] or '', row[3] or (row[1] and '0' or '') }
end
