-- cost_window(log, budget, per, now): a sliding window of claimed cost (cost limits:
-- docs/flow-control.md) as a table the claim asks: fits(cost), free_at(cost),
-- take(text, cost, name), and write() once at the end of the call.
-- The ZSET log holds one member per claim, '<cost>:<claim ms>:<id>:<attempts>:<row
-- number>' scored by the claim time (so the completion can find its own claim's member
-- and settle it: lib/settle_cost.lua), and one member 'sum:<total>' at score +inf, the
-- cost of all the others: the budget check reads one member, not the window. The sum
-- lives in the key it sums, so the two expire together (PEXPIRE one window after the
-- last claim) and cannot disagree. Members older than per ms come off the sum and out
-- of the key, at most COST_TRIM a call: a sum that still counts some (after a long
-- pause) holds claims back a little longer, never lets more through. A key of another
-- type (damaged by hand) has no room until it expires (lib/full_window.lua): never an
-- error halfway through a claim that has leased jobs already.
-- budget: the most cost in any per ms (a claim fits while sum + cost <= budget).
--!include lib/call_chunked.lua
--!include lib/cost_sum.lua
--!include lib/full_window.lua
--!include lib/put_cost_sum.lua
local function cost_window(log, budget, per, now)
  local TRIM, SLACK = 256, budget * 1e-12 -- SLACK: rounding of fractional costs
  local w = { stamps = {}, budget = budget, per = per }
  local member, sum, damaged = cost_sum(log)
  if damaged then return full_window(w, log, per, now) end
  local old = redis.call('ZRANGEBYSCORE', log, '-inf', now - per, 'LIMIT', 0, TRIM)
  for _, m in ipairs(old) do sum = sum - (tonumber(string.match(m, '^[^:]*')) or 0) end
  if #old > 0 then call_chunked('ZREM', log, old, 1000) end
  local dirty = #old > 0

  function w.fits(cost)
    return sum + cost <= budget + SLACK
  end
  -- When enough cost will have left the window for cost to fit (ms epoch), from the
  -- oldest TRIM claims (past them: when the last one read leaves, to look again then).
  function w.free_at(cost)
    local head = redis.call('ZRANGE', log, 0, TRIM - 1, 'WITHSCORES')
    local left, at = sum, now + per
    for i = 1, #head, 2 do
      if head[i + 1] == 'inf' then break end
      left = left - (tonumber(string.match(head[i], '^[^:]*')) or 0)
      at = tonumber(head[i + 1]) + per
      if left + cost <= budget + SLACK then break end
    end
    return at
  end
  -- One claim of cost (text: as the row stores it); name: '<claim ms>:<id>:<attempts>:<number>'.
  function w.take(text, cost, name)
    sum = sum + cost
    w.stamps[#w.stamps + 1] = now
    w.stamps[#w.stamps + 1] = text .. ':' .. name
    dirty = true
  end
  function w.write()
    if not dirty then return end
    if #w.stamps > 0 then call_chunked('ZADD', log, w.stamps, 1000) end
    put_cost_sum(log, member, sum)
    if #w.stamps > 0 then redis.call('PEXPIRE', log, per) end
  end
  function w.sum() return sum end
  return w
end
