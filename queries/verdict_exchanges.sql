-- verdict_exchanges: the exchanges behind the verdict table, one row per (exchange, check) not same-ok
-- Columns: exchange_id, check, verdict (fixed, broken, still-wrong, changed-wrong), the chunkings
-- judged and under how many each side fails, the smallest failing chunking of the side the verdict
-- blames (new for broken/still-wrong/changed-wrong, old for fixed; fewest deltas, a streamed chunking
-- before the whole-text parse) and its deltas, and whether the verdict is unreliable (the old side's
-- replay did not reproduce what was served). Render checks an exchange could not be judged on (its
-- reference failed to render) are rows with verdict `not-judged` and the `reason` (null on the
-- other rows). Every (exchange, check, chunking) pair with both
-- sides' outcomes: `replay query --sql "SELECT * FROM verdict_pairs"`.
SELECT
    exchange_id,
    "check",
    verdict,
    chunkings_judged,
    old_failing,
    new_failing,
    smallest_failing_chunking,
    smallest_failing_deltas,
    unreliable,
    NULL::VARCHAR AS reason
FROM verdicts_by_exchange
WHERE verdict <> 'same-ok'
UNION ALL
SELECT exchange_id, "check", 'not-judged', 0, NULL, NULL, NULL, NULL, false, reason
FROM render_not_judged
ORDER BY CASE verdict WHEN 'broken' THEN 0 WHEN 'still-wrong' THEN 1 WHEN 'changed-wrong' THEN 2 WHEN 'fixed' THEN 3 ELSE 4 END,
         CASE "check" WHEN 'null-leak' THEN 0 WHEN 'prompt-divergence' THEN 1 WHEN 'render-failure' THEN 2
                      WHEN 'replay-error' THEN 3 WHEN 'dropped-call' THEN 4 WHEN 'non-json-join' THEN 5
                      WHEN 'argument-mismatch' THEN 6 ELSE 7 END,
         exchange_id
