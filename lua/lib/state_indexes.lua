-- state_indexes(K, skip): every state's index key in K (the caller's KEYS by name),
-- in State order, as { state = <name>, key = <key>, expiring = <bool> }; the state
-- named skip (or nil) is left out. expiring: the index's score is when the row
-- expires (keep_succeeded), so a count of live rows counts scores above now.
-- The library declares every index, so the loader passes them all to its callers;
-- a state missing from K is an error naming it.
-- KEYS  leaseq:{<queue>}:waiting  ZSET  ids in state waiting
-- KEYS  leaseq:{<queue>}:pending  ZSET  ids in state pending
-- KEYS  leaseq:{<queue>}:scheduled  ZSET  ids in state scheduled
-- KEYS  leaseq:{<queue>}:active  ZSET  ids in state active
-- KEYS  leaseq:{<queue>}:suspended  ZSET  ids in state suspended
-- KEYS  leaseq:{<queue>}:succeeded  ZSET  ids in state succeeded
-- KEYS  leaseq:{<queue>}:dead  ZSET  ids in state dead
-- KEYS  leaseq:{<queue>}:cancelled  ZSET  ids in state cancelled
-- Generated from leaseq.types.State by `python -m leaseq.store.states`; do not edit
-- by hand (a test compares them).
local STATE_INDEXES = {
  { 'waiting', false },
  { 'pending', false },
  { 'scheduled', false },
  { 'active', false },
  { 'suspended', false },
  { 'succeeded', true },
  { 'dead', false },
  { 'cancelled', true },
}
local function state_indexes(K, skip)
  local out = {}
  for _, s in ipairs(STATE_INDEXES) do
    if s[1] ~= skip then
      if not K[s[1]] then error('state_indexes: the header declares no index of ' .. s[1]) end
      out[#out + 1] = { state = s[1], key = K[s[1]], expiring = s[2] }
    end
  end
  return out
end
