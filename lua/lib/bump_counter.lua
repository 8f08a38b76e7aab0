-- bump_counter(meta, field, n, now): add n to the queue's counter field (meta
-- hash) and to the same field of the history buckets that hold now: the
-- minute (key <stem>history:m:<minute>, kept 61 min) and the ten minutes
-- (<stem>history:t:<ten-minute>, kept 24 h 10 min), both HASHes that expire by
-- themselves at a fixed time (the bucket's start plus its retention; PEXPIRE,
-- not PEXPIREAT, so the least-privilege ACL of docs/reliability.md suffices).
-- The stem is meta's name without its 'meta' tail ({prefix}:{<queue>}:), so the
-- buckets share the queue's hash tag. Constant work: 5 commands per call.
local function bump_counter(meta, field, n, now)
  redis.call('HINCRBY', meta, field, n)
  local stem = string.sub(meta, 1, -5)
  local minute = math.floor(now / 60000)
  local m = stem .. 'history:m:' .. minute
  redis.call('HINCRBY', m, field, n)
  redis.call('PEXPIRE', m, (minute + 61) * 60000 - now)
  local ten = math.floor(now / 600000)
  local t = stem .. 'history:t:' .. ten
  redis.call('HINCRBY', t, field, n)
  redis.call('PEXPIRE', t, (ten + 145) * 600000 - now)
end
