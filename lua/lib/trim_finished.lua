-- trim_finished(index, now, limit): drop at most limit index entries whose
-- row has expired (score <= now). Bounded, so no call pays for a backlog;
-- every script that adds one entry trims up to limit, which keeps up.
--!include lib/call_chunked.lua
local function trim_finished(index, now, limit)
  local ids = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, limit)
  call_chunked('ZREM', index, ids, 1000)
  return #ids
end
