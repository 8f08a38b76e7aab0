-- snapshot_pages(index, cursor, limit, page, started, visit): walk the ZSET index by
-- score for a run that pages over several calls (purge, retry-all), page entries at a
-- time, up to limit, while the time budget lasts (over_budget; one page at least).
-- cursor = {upto = , after = , skip = } as the caller got them: upto is the snapshot's
-- highest score, '' on the first call (taken here: entries added after the run began
-- score above it and are not walked); after and skip say where the last call stopped
-- (after, a score string; skip, the entries at that score the run stepped over). visit(id)
-- acts on one entry and returns true when the entry stays in the index (stepped over),
-- false when it left it. Moves cursor on in place and returns more: 1 unless the
-- snapshot's last entry was reached (cursor.upto stays '' when the index is empty).
--!include lib/over_budget.lua
local function snapshot_pages(index, cursor, limit, page, started, visit)
  if cursor.upto == '' then
    local last = redis.call('ZRANGE', index, -1, -1, 'WITHSCORES')
    if #last == 0 then return 0 end
    cursor.upto = last[2]
  end
  local looked = 0
  while looked < limit do
    local want = math.min(page, limit - looked)
    local got = redis.call('ZRANGEBYSCORE', index, cursor.after, cursor.upto, 'WITHSCORES',
      'LIMIT', cursor.skip, want)
    for i = 1, #got, 2 do
      -- Stepped-over entries stay in the index: they are the first skip entries
      -- at the cursor's score.
      if got[i + 1] ~= cursor.after then cursor.after, cursor.skip = got[i + 1], 0 end
      if visit(got[i]) then cursor.skip = cursor.skip + 1 end
    end
    looked = looked + #got / 2
    if #got < 2 * want then return 0 end -- the snapshot's last entry is behind the cursor
    if over_budget(started) then break end
  end
  return 1
end
