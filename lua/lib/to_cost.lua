-- to_cost(v): v as a finite number > 0 when it is plain decimal text (digits, a point,
-- an exponent: what leaseq writes), else nil. Stricter than tonumber(), which would take
-- '0x10' or ' 5' in a field edited by hand: claims read cost fields as Python's
-- read_cost does (leaseq/store/replies.py), so what limits() and get() show is what holds.
local function to_cost(v)
  if type(v) ~= 'string' or not string.match(v, '^%d*%.?%d*[eE]?[%+%-]?%d*$') then
    return nil
  end
  local c = tonumber(v)
  if c and c == c and c > 0 and c < math.huge then return c end
  return nil
end
