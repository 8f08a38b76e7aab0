-- signal_done(done, ids): tell waiters (Queue.wait) that jobs finished -- succeeded,
-- dead or cancelled. One XADD to the queue's done STREAM ('leaseq:{<queue>}:done',
-- passed in KEYS by every script that finishes jobs), with the finished ids
-- space-separated in the field 'ids' (ids hold no whitespace).
-- Trimmed to about 10000 entries: the stream is a signal, the rows stay the truth.
-- Also called for jobs deleted before they finished (delete, purge): a waiter
-- reads the row, finds it gone and raises JobNotFound now, not at its timeout.
-- pcall: a done key overwritten by hand with another type must not fail the
-- script after its other writes (waiters then wait to their timeouts).
local function signal_done(done, ids)
  redis.pcall('XADD', done, 'MAXLEN', '~', 10000, '*', 'ids', ids)
end
