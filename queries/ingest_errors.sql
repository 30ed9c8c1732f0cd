-- ingest_errors: every capture line (or HAR entry, or byte range) that did not become an exchange
-- One row per ingest error, in file then line order (a fault with no line, such as a truncated
-- frame, after the file's numbered lines, by byte offset):
--   file         the capture file (ingest_errors.source_file)
--   line         1-based line, or HAR entry number; null when the fault has no line
--   kind         short reason: bad-json, not-object, missing-request, not-utf8, ...
--   message      what was wrong (the exception text, scrubbed)
--   excerpt      at most 120 characters of the record, scrubbed
SELECT source_file AS file, source_line AS line, reason AS kind, detail AS message, excerpt
FROM ingest_errors
ORDER BY source_file, source_line NULLS LAST, byte_offset NULLS LAST, reason
