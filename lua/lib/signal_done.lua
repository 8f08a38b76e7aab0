-- signal_done(done, ids): tell waiters (Queue.wait) that jobs finished -- succeeded,
-- dead or cancelled. ids: one id, or a list of them. XADD to the queue's done
-- STREAM ('leaseq:{<queue>}:done', passed in KEYS by every script that finishes
-- jobs), with the finished ids space-separated in the field 'ids' (ids hold no
-- whitespace), at most 100 ids an entry.
-- Trimmed to about 10000 entries: the stream is a signal, the rows stay the truth.
-- Why 100: MAXLEN bounds entries, not ids; a worker's complete_many of 500
-- would otherwise let the bound hold 5 million ids (~100 MB). At 100 an entry it
-- holds at most a million (~20 MB), for one XADD per 100 finished jobs.
-- Also called for jobs deleted before they finished (delete, purge): a waiter
-- reads the row and finds it gone (leaseq.GONE) now, not at its timeout.
-- pcall: a done key overwritten by hand with another type must not fail the
-- script after its other writes (waiters then wait to their timeouts).
local IDS_PER_SIGNAL = 100
local function signal_done(done, ids)
  if type(ids) == 'string' then ids = { ids } end
  for first = 1, #ids, IDS_PER_SIGNAL do
    local last = math.min(#ids, first + IDS_PER_SIGNAL - 1)
    local res = redis.pcall('XADD', done, 'MAXLEN', '~', 10000, '*', 'ids',
      table.concat(ids, ' ', first, last))
    if type(res) == 'table' and res.err then return end
  end
end
