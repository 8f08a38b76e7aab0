-- signal_done(meta, ids): tell waiters (Queue.wait) that jobs finished -- succeeded,
-- dead or cancelled. One XADD to the queue's 'done' stream, derived from the meta key
-- 'leaseq:{<queue>}:meta' -> 'leaseq:{<queue>}:done' (same hash tag, so the same slot),
-- with the finished ids space-separated in the field 'ids' (ids hold no whitespace).
-- Trimmed to about 10000 entries: the stream is a signal, the rows stay the truth.
local function signal_done(meta, ids)
  redis.call('XADD', string.sub(meta, 1, -5) .. 'done', 'MAXLEN', '~', 10000, '*', 'ids', ids)
end
