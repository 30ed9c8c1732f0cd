-- verdicts_by_exchange (view): one verdict per (exchange, check), over every chunking judged
-- An exchange's outcome for a check is its outcomes under all the chunkings judged (view
-- verdict_pairs), so the verdicts apply to the exchange as a whole, and each exchange has exactly one:
--   unreliable     a stream check on an exchange the old side's replay did not reproduce
--                  (view fidelity_exchanges): its numbers cannot be trusted, so it is counted
--                  here and in no other column
--   same-ok        neither side is wrong under any chunking
--   fixed          old is wrong under at least one chunking, new under none
--   broken         new is wrong under at least one chunking, old under none
--   still-wrong    both are wrong, under the same chunkings with the same outcomes
--   improved       both are wrong, the new side under a strict subset of the old side's failing
--                  chunkings, or (null-leak) with a strict subset of the old side's leaked paths
--   changed-wrong  both are wrong, differently otherwise (other chunkings, other outcomes: another
--                  prompt SHA-256, other missing calls, other joined arguments, other content)
-- old_failing_chunkings / new_failing_chunkings: the chunkings each side fails under, sorted;
-- failing_chunkings: the two as text, `old -> new` (`-` for none).
-- smallest_failing_chunking: of the side the verdict blames (new for broken, still-wrong,
-- improved and changed-wrong; old for fixed), the failing chunking with the fewest deltas, a
-- streamed one before the whole-text parse (`parse`); `render` for the render checks.
-- Two aggregates of verdict_pairs: counts and flags over every pair (fixed-size states; 600k pairs
-- into 280k groups at 20k exchanges), and the lists and firsts over the pairs where a side is wrong
-- (few): an exchange whose sides are right everywhere needs none of them (old_set / new_set /
-- smallest_* are then null), and aggregating them per group over every pair
-- was 0.4 CPU s at 20k exchanges and did not fit 256 MB at 80k.
WITH counts AS (
    SELECT
        exchange_id,
        "check",
        bool_or(old_wrong) AS old_any,
        bool_or(new_wrong) AS new_any,
        bool_and(old_wrong = new_wrong AND (NOT old_wrong OR old_outcome IS NOT DISTINCT FROM new_outcome)) AS alike,
        count(*) AS chunkings_judged,
        count(*) FILTER (WHERE old_wrong) AS old_failing,
        count(*) FILTER (WHERE new_wrong) AS new_failing,
        bool_or(unreliable) AS unreliable
    FROM verdict_pairs
    GROUP BY exchange_id, "check"
),
wrong AS (
    SELECT
        exchange_id,
        "check",
        list_sort(list(chunking) FILTER (WHERE old_wrong)) AS old_set,
        list_sort(list(chunking) FILTER (WHERE new_wrong)) AS new_set,
        first(old_items) AS old_items,
        first(new_items) AS new_items,
        CASE WHEN bool_or(new_wrong)
             THEN first(chunking ORDER BY chunking IN ('parse', 'render'), new_deltas, chunking) FILTER (WHERE new_wrong)
             ELSE first(chunking ORDER BY chunking IN ('parse', 'render'), old_deltas, chunking) FILTER (WHERE old_wrong) END AS smallest_failing_chunking,
        CASE WHEN bool_or(new_wrong)
             THEN first(new_deltas ORDER BY chunking IN ('parse', 'render'), new_deltas, chunking) FILTER (WHERE new_wrong)
             ELSE first(old_deltas ORDER BY chunking IN ('parse', 'render'), old_deltas, chunking) FILTER (WHERE old_wrong) END AS smallest_failing_deltas
    FROM verdict_pairs
    WHERE old_wrong OR new_wrong
    GROUP BY exchange_id, "check"
),
per AS (
    SELECT c.*, w.old_set, w.new_set, w.old_items, w.new_items,
           w.smallest_failing_chunking, w.smallest_failing_deltas
    FROM counts c
    LEFT JOIN wrong w USING (exchange_id, "check")
)
SELECT
    exchange_id,
    "check",
    CASE WHEN unreliable THEN 'unreliable'
         WHEN NOT old_any AND NOT new_any THEN 'same-ok'
         WHEN old_any AND NOT new_any THEN 'fixed'
         WHEN NOT old_any AND new_any THEN 'broken'
         WHEN alike THEN 'still-wrong'
         WHEN (len(coalesce(new_set, [])) < len(coalesce(old_set, [])) AND list_has_all(coalesce(old_set, []), coalesce(new_set, [])))
           OR ("check" = 'null-leak' AND len(coalesce(new_items, [])) < len(coalesce(old_items, []))
               AND list_has_all(coalesce(old_items, []), coalesce(new_items, []))) THEN 'improved'
         ELSE 'changed-wrong' END AS verdict,
    chunkings_judged,
    old_failing,
    new_failing,
    coalesce(old_set, []) AS old_failing_chunkings,
    coalesce(new_set, []) AS new_failing_chunkings,
    coalesce(nullif(array_to_string(old_set, ', '), ''), '-') || ' -> ' || coalesce(nullif(array_to_string(new_set, ', '), ''), '-') AS failing_chunkings,
    smallest_failing_chunking,
    smallest_failing_deltas,
    unreliable
FROM per
