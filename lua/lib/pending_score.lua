-- pending_score(priority, seq): a ready job's score, in ZSET pending and in its fair
-- group's ZSET: priority * PENDING_PRIORITY_FACTOR + seq, so ZPOPMIN yields the
-- lowest priority first and FIFO within one. seq is the queue's FIFO sequence (meta
-- field seq, taken by push_pending and push_ready): it restarts once it has passed
-- PENDING_SEQ_RESTART while pending is empty, and before it reaches
-- PENDING_PRIORITY_FACTOR (only FIFO order could suffer then, never a job), so it
-- never spills into the next priority. With priority <= 1,000,000 (< 2^20) both
-- terms stay below 2^53: the score is an exact integer in a double. A fair group's
-- job sits in pending at PENDING_GROUPED + its score, above every ungrouped job, so
-- the ungrouped ZPOPMIN path stops at the first score from PENDING_GROUPED up
-- (claim); rotate_groups leases those. docs/keys-and-rows.md states the rule.
local PENDING_PRIORITY_FACTOR = 8589934592 -- 2^33
local PENDING_SEQ_RESTART = 4294967296 -- 2^32
local PENDING_GROUPED = 9007199254740992 -- 2^53
local function pending_score(priority, seq)
  return priority * PENDING_PRIORITY_FACTOR + seq
end
