-- apply_limits(limits, claims, active, now, count): how many of count leases one claim may
-- take under the queue's global limits (HASH limits: concurrency, rate, per_ms), and how long
-- until one more slot frees when none is free now (ms; -1 when no limit holds the claim back).
-- concurrency: at most that many leases in the active index, whoever holds them.
-- rate: at most rate claims in any per_ms span. The ZSET claims holds the claim times of the
-- current span (score = ms epoch); older ones are trimmed here, so it never holds much more
-- than rate entries and a claim's cost stays O(log n). Also returns whether rate is on (the
-- caller then records its claims in that ZSET).
local function apply_limits(limits, claims, active, now, count)
  local l = redis.call('HMGET', limits, 'concurrency', 'rate', 'per_ms')
  local conc, rate, per = tonumber(l[1]), tonumber(l[2]), tonumber(l[3])
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
      wait = math.max(wait, tonumber(t[2]) + per - now)
    end
  end
  return allowed, wait, (rate and per) and true or false
end
