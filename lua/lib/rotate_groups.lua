-- rotate_groups(pending, K, count, budget, lease_one, got, now, active, added): fair groups' part of a
-- claim. Each turn takes the group at the head of ZSET K.groups (lowest round-robin
-- number), pops its best job from ZSET K.group_prefix .. <name> (priority, then FIFO), removes the
-- id from pending and leases it with lease_one(id, group) (true and the claim's unique name
-- when leased; false, nil, true for an id whose row is now in another group: its
-- pending entry stays); the group goes to the back (a fresh meta
-- gseq) or leaves the rotation once empty. The ungrouped jobs take one turn too, as if they
-- were one more group (their place: meta gturn): LIST K.ready's head first (take_ready), then
-- pending's lowest score below PENDING_GROUPED. A group at group_concurrency (HASH K.limits;
-- active count in HASH K.group_active) leaves the rotation for HASH K.group_held
-- until group_done lets it back. A group at its rate (HASH K.limits group_rate per
-- group_per_ms, or its own 'rate:<name>' per 'per_ms:<name>'; its claim times in the ZSET
-- K.group_claims_prefix .. <name>, a sliding window on the server clock, trimmed only
-- once it holds rate entries, that expires one window after its last claim) leaves the rotation for ZSET K.group_rate_held, scored by when it may claim
-- again; each call first lets back the groups whose time has come (at most 100).
-- A group's own 'concurrency:<name>' overrides group_concurrency. Overrides are read
-- per turn only while meta-like field 'group_overrides' in K.limits says any exist.
-- Stops at count leases (got() says how many so far), when
-- budget turns run out, or when no group has ready jobs. active: a table, group -> its
-- count of active leases, which lease_one keeps up to date as it leases (a group not in
-- it yet is read here once: K.group_active plus added, group -> the leases this call
-- made in it that the caller has yet to add to K.group_active).
-- Each turn is O(log n) in jobs and groups. Returns the budget left.
--
-- Cost: the turns are taken a pass at a time. A group that takes its turn goes
-- behind every group now in the rotation (its fresh gseq is above every score),
-- so the order of the next K turns is the order of the first K heads, read with
-- one ZRANGE; the groups sent to the back or out are written with one ZADD and
-- one ZREM per pass. Once a pass has seen the whole rotation, the passes after it
-- go round the groups it sent to the back without reading the rotation again,
-- and their new places and leavers are written with one ZADD and one ZREM per
-- call. The leased ids leave pending with one ZREM per call, and
-- gseq/gturn are read once and written once. When a pass sees the whole
-- rotation, a group's jobs are popped ahead for the turns the call can give it
-- (ZPOPMIN of count / members, within its cap and its rate), handed out one a
-- turn, and what no turn reached goes back under its own score at the end: a
-- group costs one ZPOPMIN and one ZCARD (asked only once its popped ids are
-- spent) per call, not per job. Its active count and the length of its rate log
-- are read once per call and then counted here; its new rate-log entries are
-- written with one ZADD per call (before any trim that must see them), and the
-- log's expiry is set once per call. The order is exactly the turn-by-turn one
-- (tests/store/test_model.py models it; tests/store/test_groups.py checks big calls).
-- KEYS  leaseq:{<queue>}:ready            LIST  ungrouped ids of priority 0 ready to claim, FIFO (lib/take_ready.lua)
-- KEYS  leaseq:{<queue>}:groups           ZSET  fair groups with ready jobs, score = round-robin turn
-- KEYS  leaseq:{<queue>}:group_active     HASH  group -> leases active now
-- KEYS  leaseq:{<queue>}:group_held       HASH  groups held back at group_concurrency
-- KEYS  leaseq:{<queue>}:group_rate_held  ZSET  groups held back at their rate, score = ms epoch they may claim again
-- KEYS  leaseq:{<queue>}:limits           HASH  group limits: group_concurrency, group_rate, group_per_ms, a group's own overrides
-- KEYS  leaseq:{<queue>}:meta             HASH  fields gseq and gturn, the rotation's turns
-- ARGV  group_prefix, 'leaseq:{<queue>}:group:' (string): a fair group's ready ids are the ZSET group_prefix .. <name>
-- ARGV  group_claims_prefix, 'leaseq:{<queue>}:group_claims:' (string): a fair group's claim times in its rate window are the ZSET group_claims_prefix .. <name> (expires with it)
--!include lib/call_chunked.lua
--!include lib/pending_score.lua
--!include lib/take_ready.lua
--!include lib/to_count.lua
local function rotate_groups(pending, K, count, budget, lease_one, got, now, active, added)
  local meta, groups = K.meta, K.groups
  local l = redis.call('HMGET', K.limits, 'group_concurrency', 'group_rate', 'group_per_ms',
    'group_overrides', 'group_cost_rate')
  local cap, rate, per = to_count(l[1]), to_count(l[2]), to_count(l[3]) -- lib/to_count.lua
  local overrides = (to_count(l[4]) or 0) > 0
  if rate or overrides or l[5] then
    -- Rate-held groups whose window has moved on rejoin the rotation (at the back).
    local due = redis.call('ZRANGEBYSCORE', K.group_rate_held, '-inf', now, 'LIMIT', 0, 100)
    for _, group in ipairs(due) do
      redis.call('ZREM', K.group_rate_held, group)
      if redis.call('ZCARD', K.group_prefix .. group) > 0 then
        redis.call('ZADD', groups, 'NX', redis.call('HINCRBY', meta, 'gseq', 1), group)
      end
    end
  end
  if redis.call('ZCARD', groups) == 0 then return budget end
  local seqs = redis.call('HMGET', meta, 'gturn', 'gseq')
  local turn, seq = tonumber(seqs[1] or '0') or 0, tonumber(seqs[2] or '0') or 0
  local seq_at_start = seq
  -- The ungrouped head changes only when an ungrouped job is popped: grouped
  -- ids sort behind every ungrouped one, so removing them later is safe.
  -- Ungrouped jobs wait in LIST K.ready (priority 0) and in pending below PENDING_GROUPED.
  local any_ungrouped = function()
    if redis.call('LLEN', K.ready) > 0 then return true end
    local u = redis.call('ZRANGE', pending, 0, 0, 'WITHSCORES')
    return #u > 0 and tonumber(u[2]) < PENDING_GROUPED
  end
  local ungrouped = any_ungrouped()
  local taken = {}
  -- Per group: entries in its rate log (counting stamps not yet written), the
  -- stamps not yet written (ZADD arguments), and the groups whose log grew.
  local logged, stamps, expiring = {}, {}, {}
  -- Per group: ids popped ahead of their turns, with their scores ({ id, score, ... }),
  -- and where the next one is. What the call leaves unused goes back with its score.
  local popped, at = {}, {}
  -- Once a pass has seen the whole rotation, the next pass's order is the groups
  -- that pass sent to the back, in that order: no need to read it again, and the
  -- rotation's new scores (last) and leavers (gone) are written once, at the end.
  local heads, whole = nil, false
  local last, gone, held = {}, {}, {}
  while got() < count and budget > 0 do
    local want = math.min(count - got(), budget)
    if not whole then
      heads = redis.call('ZRANGE', groups, 0, want - 1, 'WITHSCORES')
      whole = #heads / 2 < want
    end
    if #heads == 0 then break end
    -- When this pass sees the whole rotation, the call has about want / (its
    -- members, the ungrouped jobs one more) turns for each group: pop that many
    -- of a group's jobs at once. Otherwise a group gets one turn this pass.
    local share = 1
    if whole then
      share = math.ceil(want / (#heads / 2 + (ungrouped and 1 or 0)))
    end
    local back, out = {}, {}
    for h = 1, #heads, 2 do
      if got() >= count or budget <= 0 then break end
      local group = heads[h]
      if ungrouped and turn <= tonumber(heads[h + 1]) then
        -- The ungrouped jobs' turn comes before this group's: one job.
        budget = budget - 1
        -- No room in the queue's cost window (lib/cost_gate.lua): it goes back, the claim ends.
        -- The list's head first: a stale entry there (lib/unready.lua) is dropped and
        -- the next one taken, so that entries of jobs gone do not use up the turn.
        local held, done = false, false
        -- (got() says count once the call's time budget is spent: it stops the drops too.)
        while not done and budget > 0 and got() < count and redis.call('LLEN', K.ready) > 0 do
          local _, stopped, stale = take_ready(K, 1, lease_one)
          held, done = stopped, stopped or stale == 0
          if not done then budget = budget - 1 end
        end
        local p = not done and got() < count and redis.call('ZRANGE', pending, 0, 0, 'WITHSCORES') or {}
        if #p > 0 and tonumber(p[2]) < PENDING_GROUPED then
          redis.call('ZREM', pending, p[1])
          held = select(4, lease_one(p[1]))
          if held then redis.call('ZADD', pending, p[2], p[1]) end
        end
        if held then break end
        seq = seq + 1
        turn = seq
        ungrouped = any_ungrouped()
        if got() >= count or budget <= 0 then break end
      end
      budget = budget - 1
      local ready = K.group_prefix .. group
      local gcap, grate, gper = cap, rate, per
      if overrides then
        local o = redis.call('HMGET', K.limits, 'concurrency:' .. group, 'rate:' .. group,
          'per_ms:' .. group)
        gcap = to_count(o[1]) or cap
        if to_count(o[2]) and to_count(o[3]) then grate, gper = to_count(o[2]), to_count(o[3]) end
      end
      local claims, free_at = nil, nil
      if grate and gper and gper > 0 then
        claims = K.group_claims_prefix .. group
        -- Fewer entries than the rate: under it whatever their age. Only a group
        -- near its rate pays for the trim (so the log never holds much more
        -- than rate entries, and a group well below its rate costs a ZCARD).
        local over = (logged[group] or redis.call('ZCARD', claims)) - grate
        if over >= 0 and stamps[group] then
          -- The trim and the count must see this call's entries.
          call_chunked('ZADD', claims, stamps[group], 1000)
          stamps[group] = nil
        end
        if over >= 0 then
          redis.call('ZREMRANGEBYSCORE', claims, '-inf', now - gper)
          over = redis.call('ZCARD', claims) - grate
        end
        logged[group] = over + grate
        if over >= 0 then
          local t = redis.call('ZRANGE', claims, over, over, 'WITHSCORES')
          free_at = (#t > 0 and tonumber(t[2]) or now) + gper
        end
      end
      if gcap and not active[group] then
        active[group] = (tonumber(redis.call('HGET', K.group_active, group) or '0') or 0)
          + (added[group] or 0)
      end
      if gcap and active[group] >= gcap then
        out[#out + 1] = group
        held[group] = true
        redis.call('HSET', K.group_held, group, 1)
      elseif free_at then
        -- At its rate: out of the rotation until its window frees a slot.
        out[#out + 1] = group
        held[group] = true
        redis.call('ZADD', K.group_rate_held, free_at, group)
      else
        local mine = popped[group]
        if not mine or at[group] > #mine then
          -- Never more than its cap or its rate can let it take this call.
          local k = share
          if gcap then k = math.min(k, gcap - active[group]) end
          if claims then k = math.min(k, grate - logged[group]) end
          mine = redis.call('ZPOPMIN', ready, math.max(k, 1))
          popped[group], at[group] = mine, 1
        end
        local id = mine[at[group]]
        local hold, free_at_ms
        if id then
          at[group] = at[group] + 2
          local leased, name, elsewhere
          leased, name, elsewhere, hold, free_at_ms = lease_one(id, group)
          if hold then at[group] = at[group] - 2 end -- not leased: it goes back (below)
          -- An id made again in another group keeps its pending entry.
          if not elsewhere and not hold then taken[#taken + 1] = id end
          if leased and claims then
            -- One member per claim (the id alone would repeat: a job released and
            -- claimed again in the same millisecond would count once).
            local s = stamps[group] or {}
            s[#s + 1] = now
            s[#s + 1] = now .. ':' .. name
            stamps[group] = s
            logged[group] = logged[group] + 1
            if not expiring[group] then
              expiring[group] = gper
              expiring[#expiring + 1] = group
            end
          end
        end
        if hold == 'queue' then break end -- the claim ends; the group keeps its place
        -- Ids popped ahead say the group is not empty; without them, ask.
        if hold == 'group' then
          -- No room in its cost window: out of the rotation until there is, as at its rate.
          out[#out + 1] = group
          held[group] = true
          redis.call('ZADD', K.group_rate_held, free_at_ms, group)
        elseif at[group] > #mine and redis.call('ZCARD', ready) == 0 then
          out[#out + 1] = group
        else
          seq = seq + 1
          back[#back + 1] = seq
          back[#back + 1] = group
        end
      end
    end
    if whole then
      local next_heads = {}
      for i = 1, #back, 2 do
        last[back[i + 1]] = back[i]
        next_heads[#next_heads + 1] = back[i + 1]
        next_heads[#next_heads + 1] = back[i]
      end
      for _, group in ipairs(out) do
        last[group] = nil
        gone[#gone + 1] = group
      end
      heads = next_heads
    else
      if #back > 0 then call_chunked('ZADD', groups, back, 1000) end
      if #out > 0 then call_chunked('ZREM', groups, out, 1000) end
    end
  end
  local moved, leave = {}, {}
  for _, group in ipairs(gone) do -- (its place in last was dropped as it left)
    -- An emptied group stays if this call made one of its jobs ready again (a
    -- lease_one that dead-lettered a parent can): its ZADD NX found it still here.
    if held[group] or redis.call('ZCARD', K.group_prefix .. group) == 0 then
      leave[#leave + 1] = group
    end
  end
  for group, at_seq in pairs(last) do
    moved[#moved + 1] = at_seq
    moved[#moved + 1] = group
  end
  if #moved > 0 then call_chunked('ZADD', groups, moved, 1000) end
  if #leave > 0 then call_chunked('ZREM', groups, leave, 1000) end
  for group, mine in pairs(popped) do
    -- Popped ahead but not reached: back in place, under their own scores.
    if at[group] <= #mine then
      local put = {}
      for i = at[group], #mine, 2 do
        put[#put + 1] = mine[i + 1]
        put[#put + 1] = mine[i]
      end
      call_chunked('ZADD', K.group_prefix .. group, put, 1000)
    end
  end
  -- A log expires one window after its group's last claim: the call's claims share one time.
  for _, group in ipairs(expiring) do
    local log = K.group_claims_prefix .. group
    if stamps[group] then call_chunked('ZADD', log, stamps[group], 1000) end
    redis.call('PEXPIRE', log, expiring[group])
  end
  if #taken > 0 then call_chunked('ZREM', pending, taken, 1000) end
  if seq ~= seq_at_start then
    -- gseq moves by what this call used: a group that a lease_one made ready (its
    -- ZADD NX took a number with HINCRBY) must not see the counter go back.
    redis.call('HSET', meta, 'gturn', string.format('%d', turn))
    local moved_to = redis.pcall('HINCRBY', meta, 'gseq', seq - seq_at_start)
    if type(moved_to) == 'table' and moved_to['err'] then
      redis.call('HSET', meta, 'gseq', string.format('%d', seq)) -- damaged by hand: start over
    end
  end
  return budget
end
