-- unique_holder(K, A, now, job_prefix): the uniqueness rules of one enqueue call
-- (docs/states.md#uniqueness). A.unique holds one key per job ('{}' = none),
-- A.unique_period_ms the throttle window (0 = held while the holder is
-- unfinished), A.unique_replace '1' for keep-last. K.unique is the HASH
-- key -> '<holder id>' or '<holder id> <window end ms>'; K.unique_windows the ZSET
-- of throttle windows by end (a bounded number of ended ones is trimmed per call).
-- A holder holds its key while its window is open, or, without a window, while its
-- row exists, carries the key and is unfinished: an entry naming a row that is gone
-- or finished is free (free_unique releases it as the holder finishes).
-- Returns a table of three functions:
--   take(i, id, payload): job i (id) is new; nil = create it; true = create it parked
--     (keep-last behind an active holder: state scheduled at PARKED until free_unique
--     makes it due); a string = not created, the holder's id is the reply. With
--     replace, a holder that has not started (waiting, pending, scheduled) gets the
--     payload (its delay restarted when A.delay_ms > 0 and it waits for its first run) and the
--     old one goes to the event stream (log_edit).
--   row(i, base, nb): put job i's unique_key after base[nb] (or clear it); return the
--     payload to store (a later duplicate of the same call may have replaced it).
--   park(parked, base, nb, incarnation, log): write the parked jobs' rows (fields
--     unique_key, after), index them and link them from their holder (unique_next);
--     return the last incarnation used.
-- KEYS  leaseq:{<queue>}:unique          HASH  uniqueness key -> '<holder id>' or '<holder id> <window end ms>'
-- KEYS  leaseq:{<queue>}:unique_windows  ZSET  uniqueness keys with a throttle window, score = its end ms
-- KEYS  leaseq:{<queue>}:scheduled       ZSET  ids waiting for a time (parked keep-last duplicates)
--!include lib/log_edit.lua
--!include lib/log_event.lua
--!include lib/parked.lua
--!include lib/state_kind.lua
local function unique_holder(K, A, now, job_prefix)
  local keys = {}
  for key in string.gmatch(A.unique, '%S+') do keys[#keys + 1] = key end
  local period, replace = tonumber(A.unique_period_ms), A.unique_replace == '1'
  local delay_ms = tonumber(A.delay_ms)
  local mine, ids, bodies, after = {}, {}, {}, {}
  if period > 0 then
    for _, key in ipairs(redis.call('ZRANGEBYSCORE', K.unique_windows, '-inf', now, 'LIMIT', 0, 16)) do
      redis.call('ZREM', K.unique_windows, key)
      local held = redis.call('HGET', K.unique, key)
      local ends = held and string.match(held, ' (%d+)$')
      if ends and tonumber(ends) <= now then redis.call('HDEL', K.unique, key) end
    end
  end
  local u = {}

  local hold = function(i, id, key, body)
    mine[key], ids[i], bodies[i] = i, id, body
  end

  function u.take(i, id, body)
    local key = keys[i]
    if key == nil or key == '{}' then return nil end
    local j = mine[key]
    if j then
      if replace then bodies[j] = body end
      return ids[j]
    end
    -- A free key (the common case) is taken with one HSETNX; a held one is read.
    local value = id
    if period > 0 then value = id .. ' ' .. string.format('%d', now + period) end
    if redis.call('HSETNX', K.unique, key, value) == 1 then
      hold(i, id, key, body)
      if period > 0 then redis.call('ZADD', K.unique_windows, now + period, key) end
      return nil
    end
    local held = redis.call('HGET', K.unique, key)
    if held then
      local holder, ends = string.match(held, '^(%S+) ?(%d*)$')
      local hjob = job_prefix .. (holder or '')
      local row = redis.pcall('HMGET', hjob, 'state', 'unique_key', 'attempts', 'payload', 'after')
      if row['err'] then row = {} end
      local state = row[1]
      local live = row[2] == key and state ~= nil and state_kind(state) == 'unfinished'
      if holder and ((ends ~= '' and tonumber(ends) > now) or (ends == '' and live)) then
        if replace and live and state ~= 'active' then
          redis.call('HSET', hjob, 'payload', body)
          log_edit(K, 'replaced', holder, state, row[3], row[4], now)
          -- Debounce: a delayed holder that never ran starts its delay again (not
          -- a retry's backoff, nor a successor parked behind a running job).
          if state == 'scheduled' and delay_ms > 0 and row[3] == '0' and not row[5] then
            redis.call('ZADD', K.scheduled, 'XX', now + delay_ms, holder)
            redis.call('HSET', hjob, 'run_at', now + delay_ms)
          end
        elseif replace and live and ends == '' then
          hold(i, id, key, body)
          after[i] = holder
          redis.call('HSET', K.unique, key, id)
          return true
        end
        return holder
      end
    end
    -- The entry names a holder that no longer holds: take the key over.
    hold(i, id, key, body)
    redis.call('HSET', K.unique, key, value)
    if period > 0 then redis.call('ZADD', K.unique_windows, now + period, key) end
    return nil
  end

  function u.row(i, base, nb)
    local key = keys[i]
    if key and key ~= '{}' then
      base[nb + 1], base[nb + 2] = 'unique_key', key
    else
      base[nb + 1], base[nb + 2] = nil, nil
    end
    return bodies[i] or base[8]
  end

  function u.park(parked, base, nb, incarnation, log)
    if #parked == 0 then return incarnation end
    local state = base[2]
    base[2] = 'scheduled'
    for _, i in ipairs(parked) do
      incarnation = incarnation + 1
      base[8], base[12] = bodies[i], string.format('%d', incarnation)
      base[nb + 1], base[nb + 2], base[nb + 3], base[nb + 4] = 'unique_key', keys[i], 'after', after[i]
      redis.call('HSET', job_prefix .. ids[i], (table.unpack or unpack)(base))
      redis.call('ZADD', K.scheduled, PARKED, ids[i])
      redis.call('HSET', job_prefix .. after[i], 'unique_next', ids[i])
      log_event(log, 'new', 'scheduled', ids[i], 0)
    end
    base[2], base[nb + 1], base[nb + 2], base[nb + 3], base[nb + 4] = state, nil, nil, nil, nil
    return incarnation
  end

  return u
end
