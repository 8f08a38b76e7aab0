-- state_kind(state): 'finished' for a state no script moves a job out of by itself,
-- 'unfinished' for the others, nil for a state leaseq never writes (a row damaged
-- by hand).
-- Generated from leaseq.types.State by `python -m leaseq.store.states`; do not edit
-- by hand (a test compares them).
local STATE_KINDS = {
  waiting = 'unfinished',
  pending = 'unfinished',
  scheduled = 'unfinished',
  active = 'unfinished',
  suspended = 'unfinished',
  succeeded = 'finished',
  dead = 'finished',
  cancelled = 'finished',
}
local function state_kind(state)
  return STATE_KINDS[state]
end
