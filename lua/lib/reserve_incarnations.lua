-- reserve_incarnations(meta, n, now): reserve n row numbers for new rows
-- (docs/keys-and-rows.md, "Incarnations"); returns the number before the first, so
-- the rows get first + 1 .. first + n. A counter that starts afresh -- the
-- queue is new, or its meta hash went (drop.lua, or an operator's DEL) --
-- starts at now * 1000, above every number handed out before it unless the
-- queue created more than 1000 rows per millisecond on average since it was
-- first made; so a lease of a dropped queue's row never fits a new row.
-- Numbers that large (16 digits) must be written with string.format('%d'):
-- Lua 5.1 turns a number into text with '%.14g', which would round them.
local function reserve_incarnations(meta, n, now)
  local last = redis.call('HINCRBY', meta, 'incarnation', n)
  if last == n then
    last = now * 1000 + n
    redis.call('HSET', meta, 'incarnation', string.format('%d', last))
  end
  return last - n
end
