-- verdicts_by_exchange (view): one verdict per (exchange, check), over every chunking judged
-- An exchange's outcome for a check is its outcomes under all the chunkings judged (view
-- verdict_pairs), so the five verdicts apply to the exchange as a whole:
--   same-ok        neither side is wrong under any chunking
--   fixed          old is wrong under at least one chunking, new under none
--   broken         new is wrong under at least one chunking, old under none
--   still-wrong    both are wrong, under the same chunkings with the same outcomes
--   changed-wrong  both are wrong, differently (other chunkings, or other outcomes: another prompt
--                  SHA-256, other missing calls, other joined arguments, other content)
-- smallest_failing_chunking: of the side the verdict blames (new for broken, still-wrong and
-- changed-wrong; old for fixed), the failing chunking with the fewest deltas, a streamed one
-- before the whole-text parse (`parse`); `render` for the render checks.
-- unreliable: a stream check on an exchange the old side's replay did not reproduce (fidelity).
SELECT
    exchange_id,
    "check",
    CASE WHEN NOT bool_or(old_wrong) AND NOT bool_or(new_wrong) THEN 'same-ok'
         WHEN bool_or(old_wrong) AND NOT bool_or(new_wrong) THEN 'fixed'
         WHEN NOT bool_or(old_wrong) AND bool_or(new_wrong) THEN 'broken'
         WHEN bool_and(old_wrong = new_wrong AND (NOT old_wrong OR old_outcome IS NOT DISTINCT FROM new_outcome)) THEN 'still-wrong'
         ELSE 'changed-wrong' END AS verdict,
    count(*) AS chunkings_judged,
    count(*) FILTER (WHERE old_wrong) AS old_failing,
    count(*) FILTER (WHERE new_wrong) AS new_failing,
    CASE WHEN bool_or(new_wrong)
         THEN first(chunking ORDER BY chunking IN ('parse', 'render'), new_deltas, chunking) FILTER (WHERE new_wrong)
         ELSE first(chunking ORDER BY chunking IN ('parse', 'render'), old_deltas, chunking) FILTER (WHERE old_wrong) END AS smallest_failing_chunking,
    CASE WHEN bool_or(new_wrong)
         THEN first(new_deltas ORDER BY chunking IN ('parse', 'render'), new_deltas, chunking) FILTER (WHERE new_wrong)
         ELSE first(old_deltas ORDER BY chunking IN ('parse', 'render'), old_deltas, chunking) FILTER (WHERE old_wrong) END AS smallest_failing_deltas,
    bool_or(unreliable) AS unreliable
FROM verdict_pairs
GROUP BY exchange_id, "check"
