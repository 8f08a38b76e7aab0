-- effect_refusal(cmd, key, args): nil when an effect can be applied as the
-- data stands, else the reason it cannot. complete checks every effect of an
-- item before applying any, because a script that errors half way keeps the
-- writes it already made: an effect must happen whole or not at all.
local function effect_refusal(cmd, key, args)
  -- One effect is one command: its arguments must fit Lua 5.1's unpack.
  if #args > 4096 then return 'at most 4096 arguments per effect, not ' .. #args end
  if cmd == 'SET' then return nil end
  local want = ({ HINCRBY = 'hash', HSET = 'hash', SADD = 'set', ZADD = 'zset',
    INCRBY = 'string', XADD = 'stream' })[cmd]
  if not want then return 'command ' .. tostring(cmd) .. ' is not allowed' end
  local t = redis.call('TYPE', key)
  if type(t) == 'table' then t = t['ok'] end
  if t ~= 'none' and t ~= want then
    return key .. ' holds a ' .. tostring(t) .. '; ' .. cmd .. ' needs a ' .. want
  end
  local current = false
  if cmd == 'HINCRBY' then
    current = redis.call('HGET', key, args[1])
  elseif cmd == 'INCRBY' then
    current = redis.call('GET', key)
  end
  if current and current ~= '0'
      and (not string.match(current, '^%-?[1-9]%d*$') or #current > 18) then
    return key .. ' holds ' .. current .. ', not an integer ' .. cmd .. ' can add to'
  end
  return nil
end
