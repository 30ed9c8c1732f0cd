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
candidates AS (
    SELECT p."check", p.exchange_id, b.verdict, p.chunking, p.new_deltas AS deltas,
           row_number() OVER (PARTITION BY p."check"
                              ORDER BY p.chunking IN ('parse', 'render'), p.new_deltas, b.verdict = 'still-wrong', p.exchange_id, p.chunking) AS rank
    FROM verdict_pairs p JOIN bad b USING (exchange_id, "check")
    WHERE p.new_wrong
)
SELECT c."check", n.broken, n.still_wrong, c.exchange_id, c.verdict, c.chunking, c.deltas
FROM candidates c JOIN counts n USING ("check")
WHERE c.rank = 1
ORDER BY list_position(['null-leak', 'prompt-divergence', 'render-failure', 'replay-error', 'client-error', 'dropped-call',
                        'non-json-join', 'argument-mismatch', 'content-leak', 'name-repeat', 'call-id', 'finish-reason',
                        'streaming-fault', 'semantic-diff'], c."check")
