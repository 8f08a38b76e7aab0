-- to_count(v): v as a non-negative integer when it is plain decimal digits,
-- else nil. Stricter than tonumber(), which would accept '1e3', ' 5' or
-- '0x10' in a field an operator edited by hand.
local function to_count(v)
  if type(v) ~= 'string' or not string.match(v, '^%d+$') or #v > 15 then
    return nil
  end
  return tonumber(v)
end
