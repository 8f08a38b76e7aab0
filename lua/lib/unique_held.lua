-- unique_held(K, job_prefix, key, now): the id of the job that holds uniqueness key
-- now, or nil when the key is free (the rules of lib/unique_holder.lua): an entry
-- of HASH K.unique with an open throttle window, or naming a row that exists,
-- carries the key and is unfinished.
-- KEYS  leaseq:{<queue>}:unique  HASH  uniqueness key -> '<holder id>' or '<holder id> <window end ms>'
--!include lib/state_kind.lua
local function unique_held(K, job_prefix, key, now)
  local held = redis.call('HGET', K.unique, key)
  local holder, ends = string.match(held or '', '^(%S+) ?(%d*)$')
  if not holder then return nil end
  if ends ~= '' then
    if tonumber(ends) > now then return holder end
    return nil
  end
  local row = redis.pcall('HMGET', job_prefix .. holder, 'state', 'unique_key')
  if row['err'] or row[2] ~= key or not row[1] or state_kind(row[1]) ~= 'unfinished' then
    return nil
  end
  return holder
end
