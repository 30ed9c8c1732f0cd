-- side_states (view): each side judged against the reference, per exchange and check, over every chunking
-- The N-side form of verdict_pairs (replay matrix, and an audit's old and new alike): one row per
-- (exchange, check, side) for every side but the reference, where the check applies to that side
-- under at least one chunking (`render` for the render checks, `parse` and the streamed chunkings
-- for the stream checks). The per-row predicates are the registry's (replay/checks.py, expanded
-- from its render and stream check markers), applied exactly as verdict_pairs applies them, but
-- to each side on its own: a side is judged where the check applies to it, whatever another side did.
--   chunkings_judged           chunkings under which the check applies to the side
--   wrong                      the side is wrong under at least one of them
--   failing_chunkings          the chunkings it is wrong under, sorted
--   smallest_failing_chunking  of those, the one with the fewest deltas, a streamed one before the
--                              whole-text parse (`parse`); `render` for the render checks
--   smallest_failing_deltas    its deltas (0 for `parse` and `render`)
--   outcome                    what it got wrong under that chunking (the check's outcome text:
--                              leaked null paths, error text, missing call indexes ...)
-- Replay fidelity (the `unreliable` verdict) is not applied here: it compares the old side's
-- replay with what was served, and a matrix has no old side.
WITH
judged AS (
    SELECT exchange_id, side, chunking, n_deltas, unnest(checks) AS c FROM side_checks
)
SELECT
    exchange_id,
    c.c AS "check",
    side,
    count(*) AS chunkings_judged,
    bool_or(coalesce(c.wrong, false)) AS wrong,
    coalesce(list_sort(list(chunking) FILTER (WHERE coalesce(c.wrong, false))), []) AS failing_chunkings,
    first(chunking ORDER BY chunking IN ('parse', 'render'), n_deltas, chunking) FILTER (WHERE coalesce(c.wrong, false)) AS smallest_failing_chunking,
    first(n_deltas ORDER BY chunking IN ('parse', 'render'), n_deltas, chunking) FILTER (WHERE coalesce(c.wrong, false)) AS smallest_failing_deltas,
    first(c.outcome ORDER BY chunking IN ('parse', 'render'), n_deltas, chunking) FILTER (WHERE coalesce(c.wrong, false)) AS outcome
FROM judged
WHERE c.applies
GROUP BY exchange_id, c.c, side
