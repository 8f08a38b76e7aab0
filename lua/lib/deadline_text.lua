-- deadline_text(at): the last_error of a job dead-lettered because nothing claimed it
-- by its start-by deadline at (ms epoch, text as stored: enqueue's expires=).
local function deadline_text(at)
  return 'expired: not started by its deadline ' .. at .. ' (ms epoch, server clock)'
end
