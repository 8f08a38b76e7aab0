-- apply_effect(cmd, key, args): run one effect that effect_refusal() passed.
-- XADD always lets the server pick the entry id ('*').
local function apply_effect(cmd, key, args)
  if cmd == 'XADD' then
    redis.call('XADD', key, '*', (table.unpack or unpack)(args))
  else
    redis.call(cmd, key, (table.unpack or unpack)(args))
  end
end
