-- note_failure(job, now, attempt, to, err, tb): write a failed attempt into the
-- job row: last_error = err, traceback = tb (nil or '' removes the field: a
-- lease that expired has none, and an earlier attempt's would mislead), and one
-- line appended to the row's bounded attempt log, field 'failures':
--   <attempt> <claimed_at ms | -> <failed_at ms> <to-state> <worker | -> <error>
-- error is the first 300 characters of err with line breaks made spaces; the
-- newest 10 lines are kept. The log lives and dies with the row (no other key).
local FAILURES_KEPT, FAILURE_CHARS = 10, 300
local function note_failure(job, now, attempt, to, err, tb)
  local row = redis.call('HMGET', job, 'claimed_at', 'worker', 'failures')
  if tb and tb ~= '' then
    redis.call('HSET', job, 'last_error', err, 'traceback', tb)
  else
    redis.call('HSET', job, 'last_error', err)
    redis.call('HDEL', job, 'traceback')
  end
  local n = tonumber(attempt)
  if not n or n ~= n or n < 0 or n >= 1e15 then n = 0 end
  local claimed = tonumber(row[1])
  local worker = row[2] and string.gsub(row[2], '%s', '_') or '-'
  local text = string.gsub(string.sub(err, 1, FAILURE_CHARS), '[\r\n]', ' ')
  local line = string.format('%d', math.floor(n)) .. ' '
    .. (claimed and string.format('%d', claimed) or '-') .. ' '
    .. string.format('%d', now) .. ' ' .. to .. ' ' .. worker .. ' ' .. text
  local log = row[3] and (row[3] .. '\n' .. line) or line
  local _, breaks = string.gsub(log, '\n', '\n')
  while breaks >= FAILURES_KEPT do
    log = string.sub(log, string.find(log, '\n', 1, true) + 1)
    breaks = breaks - 1
  end
  redis.call('HSET', job, 'failures', log)
end
