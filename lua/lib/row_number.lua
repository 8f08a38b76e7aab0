-- row_number(incarnation, enqueued_at): the number that names a job row, which
-- its leases carry (claim hands it out) and lease_check compares, as text.
-- A row whose id the caller chose holds an `incarnation` field (such an id
-- may be enqueued again once the row is gone): that is its number. A row
-- under an id leaseq made (80 random bits: no other row ever gets that id,
-- but for a replay of the very call that made it) stores none, to keep the
-- row small; its number is its `enqueued_at`, which such a replay writes
-- anew. Both are plain decimal digits; a row with neither (damaged by hand)
-- is '0'. docs/keys-and-rows.md, "Incarnations".
local function row_number(incarnation, enqueued_at)
  return incarnation or enqueued_at or '0'
end
