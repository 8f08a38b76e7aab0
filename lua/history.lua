-- history.lua: the queue's counts per minute over the last hour and per ten minutes over the last day.
-- transition: none (reads only)
-- clock: server TIME via now_ms (read only: the floor is not moved)
-- flags: no-writes (it only reads)
-- KEYS[1]  leaseq:{<queue>}:meta  HASH  counters, clock (read for the clock floor)
-- ARGV[1]  history_prefix, the prefix of history buckets, leaseq:{<queue>}:history: (string)
-- ARGV[2]  minutes, how many minute buckets, newest last (integer, at most 61)
-- ARGV[3]  tens, how many ten-minute buckets, newest last (integer, at most 145)
-- derives: leaseq:{<queue>}:history:m:<minute> and :history:t:<ten-minute>  HASH  the buckets (bump_counter)
-- returns: {now_ms, first minute number, {field, value, ...} per minute..., first ten-minute number, {...} per ten}
-- errors: none
--!include lib/now_ms.lua

local meta, prefix = K.meta, A.history_prefix
local minutes, tens = tonumber(A.minutes), tonumber(A.tens)
local now = now_ms(meta, true)
local out = { now }
local last = math.floor(now / 60000)
out[#out + 1] = last - minutes + 1
for m = last - minutes + 1, last do
  out[#out + 1] = redis.call('HGETALL', prefix .. 'm:' .. m)
end
last = math.floor(now / 600000)
out[#out + 1] = last - tens + 1
for t = last - tens + 1, last do
  out[#out + 1] = redis.call('HGETALL', prefix .. 't:' .. t)
end
return out
