-- ready_count(K, field, n): add n to meta field ready_stale or ready_popped (lib/take_ready.lua)
-- and return the new value. These are bookkeeping, read by no guarantee: a value an
-- operator left there by hand (not an integer, or one HINCRBY would overflow) starts
-- over at n, never below 0, rather than fail a call whose jobs are already written.
-- KEYS  leaseq:{<queue>}:meta  HASH  fields ready_stale and ready_popped
local function ready_count(K, field, n)
  local got = redis.pcall('HINCRBY', K.meta, field, n)
  if type(got) == 'number' and got >= 0 then return got end
  redis.call('HSET', K.meta, field, math.max(n, 0))
  return math.max(n, 0)
end
