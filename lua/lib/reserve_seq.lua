-- reserve_seq(K, n): take n numbers of the queue's FIFO sequence (meta field seq) with one
-- HINCRBY; returns the number before the first (they are that + 1 .. that + n). The
-- sequence restarts by pending_score's rule: once past PENDING_SEQ_RESTART while pending
-- is empty, and always before PENDING_PRIORITY_FACTOR.
-- KEYS  leaseq:{<queue>}:meta     HASH  field seq (the FIFO sequence)
-- KEYS  leaseq:{<queue>}:pending  ZSET  ids ready to claim
--!include lib/pending_score.lua
local function reserve_seq(K, n)
  local last = redis.call('HINCRBY', K.meta, 'seq', n)
  if (last - n > PENDING_SEQ_RESTART and redis.call('ZCARD', K.pending) == 0)
      or last >= PENDING_PRIORITY_FACTOR then
    redis.call('HSET', K.meta, 'seq', n)
    last = n
  end
  return last - n
end
