-- smallest_failures: per check with broken or still-wrong exchanges, the smallest failing chunking
-- One row per check that has at least one `broken` or `still-wrong` exchange: of those exchanges,
-- the one whose new side fails under the chunking with the fewest deltas (a streamed chunking
-- before the whole-text parse `parse`; `render` for the render checks), ties broken by exchange id.
--   broken, still_wrong   the check's counts (as in the verdicts query)
--   exchange_id, verdict, chunking, deltas   the exemplar: `report.md` shows it, redacted, and
--                         writes it to RUN/exemplars/<check>.json
WITH
bad AS (SELECT * FROM verdicts_by_exchange WHERE verdict IN ('broken', 'still-wrong')),
counts AS (
    SELECT "check", count(*) FILTER (WHERE verdict = 'broken') AS broken,
           count(*) FILTER (WHERE verdict = 'still-wrong') AS still_wrong
    FROM bad GROUP BY "check"
),
-- each bad exchange's new side fails under at least one chunking, and verdicts_by_exchange holds the
-- one that comes first in this order (smallest_failing_chunking / _deltas): the first of the
-- exchanges' firsts is the first of all their failing (exchange, chunking) pairs in verdict_pairs
candidates AS (
    SELECT "check", exchange_id, verdict, smallest_failing_chunking AS chunking, smallest_failing_deltas AS deltas,
           row_number() OVER (PARTITION BY "check"
                              ORDER BY smallest_failing_chunking IN ('parse', 'render'), smallest_failing_deltas, verdict = 'still-wrong',
                                       exchange_id, smallest_failing_chunking) AS rank
    FROM bad
)
SELECT c."check", n.broken, n.still_wrong, c.exchange_id, c.verdict, c.chunking, c.deltas
FROM candidates c JOIN counts n USING ("check")
WHERE c.rank = 1
ORDER BY (SELECT k.ord FROM checks k WHERE k.name = c."check")
