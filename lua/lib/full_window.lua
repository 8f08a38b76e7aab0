-- full_window(w, log, per, now): the cost window table w (lib/cost_window.lua) for a key
-- log that holds another type than a window's ZSET (damaged by hand): no claim fits it,
-- nothing is written to it, and it expires within per ms (PEXPIRE when it has no expiry
-- or a longer one), after which a fresh window starts. What it counted is unknown, so
-- the limit errs on the safe side, for one span at most.
local function full_window(w, log, per, now)
  local left = redis.call('PTTL', log)
  if left < 0 or left > per then
    redis.call('PEXPIRE', log, per)
    left = per
  end
  function w.fits() return false end
  function w.free_at() return now + left end
  function w.take() end
  function w.write() end
  function w.sum() return math.huge end
  return w
end
