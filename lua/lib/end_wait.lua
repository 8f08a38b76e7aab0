-- end_wait(K, job, id, value, key, step): end the signal wait of a suspended row (current_job().wait_for),
-- if it waits for one: its entry leaves the waiters index and the row's wait fields go.
-- value, unless nil, is recorded as the wait's step: the signal's payload, or '' for a wait
-- that ended without one (it timed out, or was run now): no codec encodes a value to ''.
-- key and step: the row's wait_key and wait_step if the caller read them (nil: read here).
-- Returns the wait's step name, or nil for a row that waits for no signal (a sleep).
-- The caller has checked that job is a hash, and K.waiters (lib/check_type.lua) before its
-- first write.
-- KEYS  leaseq:{<queue>}:waiters  ZSET  '<signal key> <id>' of every job waiting for a signal, score 0
local function end_wait(K, job, id, value, key, step)
  if not key then
    local wait = redis.call('HMGET', job, 'wait_key', 'wait_step')
    key, step = wait[1], wait[2]
    if not key then return nil end
  end
  redis.call('ZREM', K.waiters, key .. ' ' .. id)
  redis.call('HDEL', job, 'wait_key', 'wait_step')
  if value and step then redis.call('HSET', job, 'step:' .. step, value) end
  return step
end
