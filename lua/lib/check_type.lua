-- check_type(key, kind): stop the call with a WRONGTYPE error (DamagedKey to the caller) unless
-- key holds kind ('zset', 'hash', ...) or does not exist. Call it before a script's first write
-- for each index it will write: Redis keeps what a script wrote before an error, so a key
-- damaged by hand met half way would leave a job moved out of one index and into none.
local function check_type(key, kind)
  local found = redis.call('TYPE', key).ok
  if found ~= kind and found ~= 'none' then
    error('WRONGTYPE ' .. key .. ' holds a ' .. found .. ', not a ' .. kind .. ' (damaged by hand?)')
  end
end
