-- faults_by_family: per tool-parser family and check, the exchanges each side gets wrong
-- One row per (family, check) with exchanges judged (view verdict_pairs, counted through
-- verdicts_by_exchange, which has one row per judged (exchange, check)):
--   family      the parser of the exchange's reference whole-text parse (`streams`), or
--               `(not re-streamed)` for an exchange without a raw completion (render checks only)
--   old_wrong   exchanges the old side gets wrong under at least one chunking
--   new_wrong   the same for the new side
--   exchanges   exchanges judged for the check
WITH fam AS (
    SELECT exchange_id, min(parser) AS family FROM streams WHERE side = 'reference' GROUP BY exchange_id
)
SELECT coalesce(f.family, '(not re-streamed)') AS family,
       v."check",
       count(*) FILTER (WHERE v.old_failing > 0) AS old_wrong,
       count(*) FILTER (WHERE v.new_failing > 0) AS new_wrong,
       count(*) AS exchanges
FROM verdicts_by_exchange v LEFT JOIN fam f USING (exchange_id)
GROUP BY 1, 2
ORDER BY 1, 2
