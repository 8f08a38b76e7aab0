-- lease_check(job, token): nil while the row is 'active' under this token
-- (the lease holds, even past its deadline if no reaper took it yet), else
-- the refusal to return: {'LOST', state, attempts} ('' for a missing row).
-- Tokens compare as strings, so a hand-damaged attempts never matches.
local function lease_check(job, token)
  local row = redis.call('HMGET', job, 'state', 'attempts')
  if row[1] == 'active' and row[2] == token then
    return nil
  end
  return { 'LOST', row[1] or '', row[2] or '' }
end
