-- bump_counter(K, field, n, now): add n to the queue's counter field (HASH
-- K.meta) and to the same field of the history buckets that hold now: the
-- minute (key K.history_prefix .. 'm:<minute>', kept 61 min) and the ten minutes
-- (K.history_prefix .. 't:<ten-minute>', kept 24 h 10 min), both HASHes that expire by
-- themselves at a fixed time (the bucket's start plus its retention; PEXPIRE,
-- not PEXPIREAT, so the least-privilege ACL of docs/reliability.md suffices).
-- K.history_prefix comes from leaseq.store.keys (the queue's hash tag, so the
-- buckets live in its slot). n >= 1. Constant work: 3 commands per call, 5 when
-- the call is the first of its field in a bucket: only then is the expiry set
-- (whichever field makes a bucket sets it; later bumps find it set), which
-- keeps the history off the cost of every job.
-- KEYS  leaseq:{<queue>}:meta  HASH  the queue's counters
-- ARGV  history_prefix, 'leaseq:{<queue>}:history:' (string): the history buckets are the HASHes history_prefix .. 'm:<minute>' and .. 't:<ten-minute>'
local function bump_counter(K, field, n, now)
  redis.call('HINCRBY', K.meta, field, n)
  local minute = math.floor(now / 60000)
  local m = K.history_prefix .. 'm:' .. minute
  if redis.call('HINCRBY', m, field, n) == n then
    redis.call('PEXPIRE', m, (minute + 61) * 60000 - now)
  end
  local ten = math.floor(now / 600000)
  local t = K.history_prefix .. 't:' .. ten
  if redis.call('HINCRBY', t, field, n) == n then
    redis.call('PEXPIRE', t, (ten + 145) * 600000 - now)
  end
end
