-- ready_page.lua: a page of LIST ready read by place, in one step, for the walks of find and the bulk actions.
-- transition: none (reads only)
-- clock: none
-- flags: no-writes (it only reads)
-- KEYS[1]  leaseq:{<queue>}:ready      LIST  ungrouped ids of priority 0 ready to claim, FIFO (lib/take_ready.lua)
-- KEYS[2]  leaseq:{<queue>}:meta       HASH  field ready_popped: the entries ever popped off the head for good
-- ARGV[1]  first, the place to start at (integer >= 0: an entry's place is ready_popped + its index,
--          which never changes while it waits; a place already popped starts at the head)
-- ARGV[2]  count, the most entries to return (integer >= 0)
-- derives: nothing
-- returns: flat array: ready_popped (a value that is no integer reads as 0), the list's length,
--          then the ids from place max(first, ready_popped) on, at most count
-- errors: none of its own (WRONGTYPE for a ready key damaged by hand: DamagedKey)
--!include lib/to_count.lua
local popped = to_count(redis.call('HGET', K.meta, 'ready_popped')) or 0
local out = { popped, redis.call('LLEN', K.ready) }
local first, count = math.max(0, tonumber(A.first) - popped), tonumber(A.count)
if count > 0 then
  for _, id in ipairs(redis.call('LRANGE', K.ready, first, first + count - 1)) do
    out[#out + 1] = id
  end
end
return out
