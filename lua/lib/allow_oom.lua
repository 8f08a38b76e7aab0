-- allow_oom(hash): on a server before Redis 7, let this draining script run
-- when memory is full, as '#!lua flags=allow-oom' does on Redis 7 (the
-- runner sends the plain source there, without the shebang). Redis 6 refuses
-- a memory-growing command only while the script has not written yet; this
-- no-op write (HDEL of a field no row or meta ever has: braces are not
-- allowed in names) counts as the first, and replicates nothing. hash is a
-- hash key the script was given; pcall, so a damaged key cannot abort it.
local function allow_oom(hash)
  redis.pcall('HDEL', hash, '{oom}')
end
