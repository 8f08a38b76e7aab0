-- apply_limits(limits, claims, active, now, count): how many of count leases one claim may
-- take under the queue's global limits (HASH limits: concurrency, rate, per_ms), and how long
-- until one more slot frees when none is free now (ms; -1 when no limit holds the claim back).
-- concurrency: at most that many leases in the active index, whoever holds them.
-- rate: at most rate claims in any per_ms span. The ZSET claims holds the claim times of the
-- current span (score = ms epoch); older ones are trimmed here, so it never holds much more
-- than rate entries and a claim's cost stays O(log n). Also returns whether rate is on (the
-- caller then records its claims in that ZSET).
-- A field edited by hand to anything but decimal digits ('nan', '-1', '2.5', '0x10') is
-- no limit (to_count, lib/to_count.lua, included before this file), as stats and limits
-- read it: tonumber() let 'nan' and '-5' crash every claim. per_ms 0 is no span.
--!include lib/to_count.lua
local function apply_limits(limits, claims, active, now, count)
  local l = redis.call('HMGET', limits, 'concurrency', 'rate', 'per_ms')
  local conc, rate, per = to_count(l[1]), to_count(l[2]), to_count(l[3])
  if per == 0 then per = nil end
  local allowed, wait = count, -1
  if conc then
    local over = redis.call('ZCARD', active) - conc
    allowed = math.min(allowed, math.max(0, -over))
    if over >= 0 then
      -- The earliest lease deadline: it ends by then (a completion frees a
      -- slot sooner, and pushes a wake-up token for the claimers held here).
      local head = redis.call('ZRANGE', active, over, over, 'WITHSCORES')
      if #head > 0 then wait = math.max(wait, math.max(0, tonumber(head[2]) - now)) end
    end
  end
  if rate and per then
    redis.call('ZREMRANGEBYSCORE', claims, '-inf', now - per)
    local over = redis.call('ZCARD', claims) - rate
    allowed = math.min(allowed, math.max(0, -over))
    if over >= 0 then
      -- A slot frees when the (over+1)-th oldest claim leaves the span.
      local t = redis.call('ZRANGE', claims, over, over, 'WITHSCORES')
      -- rate 0 (set by hand: set_limits refuses it) holds every claim; none is in the span.
      wait = math.max(wait, (#t > 0 and tonumber(t[2]) or now) + per - now)
    end
  end
  return allowed, wait, (rate and per) and true or false
end
