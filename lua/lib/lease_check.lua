-- lease_check(job, token, incarnation, fence): nil while the row is 'active' under
-- this token, row number (lib/row_number.lua) and fence (the lease holds, even past its
-- deadline if no reaper took it yet), else the refusal to return:
-- {'LOST', state, attempts, number, fence} ('' for a missing row or field).
-- Tokens and numbers compare as strings, so a hand-damaged attempts never matches.
-- The fence is the claiming call's random name (claim.lua, ARGV fence): attempts
-- alone repeat after a failover that lost a claim (the promoted replica never
-- saw it, so it hands out the same attempt again); the lost claim's fence is
-- one the new primary never wrote, so its holder is refused. A row claimed
-- before fences existed has none: '' matches a lease that carries none.
-- A second value, when the lease holds: the row's fair group, or false for
-- none (read in the same HMGET, so group_done need not read it again); a
-- third: the row's workflow links { depends_on, children } for job_finished; a
-- fourth: its uniqueness fields { unique_key, unique_next } for free_unique
-- (one HMGET per item on the complete path, not three).
--!include lib/row_number.lua
local function lease_check(job, token, incarnation, fence)
  local row = redis.pcall('HMGET', job, 'state', 'attempts', 'incarnation', 'group',
    'depends_on', 'children', 'enqueued_at', 'unique_key', 'unique_next', 'fence')
  if row['err'] then return { 'LOST', '', '', '', '' } end -- not a hash any more
  local number = row_number(row[3], row[7])
  local held = row[10] or ''
  if row[1] == 'active' and row[2] == token and number == incarnation and held == fence then
    return nil, row[4], { row[5], row[6] }, { row[8], row[9] }
  end
  return { 'LOST', row[1] or '', row[2] or '', row[1] and number or '', held }
end
