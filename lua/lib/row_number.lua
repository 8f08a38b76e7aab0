-- row_number(incarnation, enqueued_at): the number that names a job row, which
-- its leases carry (claim hands it out) and lease_check compares, as text.
-- A row whose id the caller chose holds an `incarnation` field (such an id
-- may be enqueued again once the row is gone): that is its number. A row
-- under an id leaseq made (80 random bits: no other row ever gets that id,
-- but for a replay of the very call that made it) stores none, to keep the
-- row small; its number is its `enqueued_at`, which such a replay writes
-- anew. A number is plain decimal digits as leaseq writes them (no sign,
-- no leading zero); a row with neither field, or one damaged by hand (abc,
-- empty, 1e20, -5, 007), is '0', so claim and lease_check agree on it and
-- its lease still acts (fenced by attempts alone, like a row from before
-- numbering). docs/keys-and-rows.md, "Incarnations".
local function row_number(incarnation, enqueued_at)
  local number = incarnation or enqueued_at
  if number and string.match(number, '^[1-9]%d*$') then return number end
  return '0'
end
