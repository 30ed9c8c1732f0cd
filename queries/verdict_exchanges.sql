-- verdict_exchanges: the exchanges behind the verdict table, one row per (exchange, check) not same-ok
-- Columns: exchange_id, check, verdict (fixed, improved, broken, still-wrong, changed-wrong,
-- unreliable), the chunkings judged and under how many each side fails, the failing chunkings
-- old -> new (`failing_chunkings`, e.g. `char, fixed-3 -> char`), the smallest failing chunking of
-- the side the verdict blames (new for broken/still-wrong/improved/changed-wrong, old for fixed;
-- fewest deltas, a streamed chunking before the whole-text parse) and its deltas, and whether the
-- exchange is unreliable (the old side's replay did not reproduce what was served). Checks an exchange could not be judged on (the reference
-- failed, or a side has no result to judge: view not_judged) are rows with verdict `not-judged`
-- and the `reason` (null on the other rows). Every (exchange, check, chunking) pair with both
-- sides' outcomes: `replay query --sql "SELECT * FROM verdict_pairs"`.
SELECT * FROM (
SELECT
    exchange_id,
    "check",
    verdict,
    chunkings_judged,
    old_failing,
    new_failing,
    failing_chunkings,
    smallest_failing_chunking,
    smallest_failing_deltas,
    unreliable,
    NULL::VARCHAR AS reason
FROM verdicts_by_exchange
WHERE verdict <> 'same-ok'
UNION ALL
SELECT exchange_id, "check", 'not-judged', 0, NULL, NULL, NULL, NULL, NULL, false, reason
FROM not_judged
)  -- a subquery: DuckDB before 2.0 orders a UNION only by columns it selects
ORDER BY CASE verdict WHEN 'broken' THEN 0 WHEN 'still-wrong' THEN 1 WHEN 'changed-wrong' THEN 2 WHEN 'improved' THEN 3
                      WHEN 'fixed' THEN 4 WHEN 'unreliable' THEN 5 ELSE 6 END,
         (SELECT k.ord FROM checks k WHERE k.name = "check"),
         exchange_id
