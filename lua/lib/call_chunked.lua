-- call_chunked(cmd, key, args, step): redis.call(cmd, key, ...) over args in
-- slices of at most step values (key may be nil, e.g. for DEL). Redis's Lua
-- 5.1 stack holds about 8000 values, so an unpack of more fails -- "too many
-- results to unpack" -- after the script's earlier writes already ran. Keep
-- step even where args are score, member pairs. Returns nothing.
local function call_chunked(cmd, key, args, step)
  local unpack_ = table.unpack or unpack
  for i = 1, #args, step do
    local j = math.min(i + step - 1, #args)
    if key then
      redis.call(cmd, key, unpack_(args, i, j))
    else
      redis.call(cmd, unpack_(args, i, j))
    end
  end
end
