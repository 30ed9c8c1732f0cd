-- verdicts: per check, how many exchanges the change fixed, broke, left right or left wrong
-- One row per check (null-leak, prompt-divergence, render-failure, replay-error, dropped-call,
-- non-json-join, argument-mismatch, content-leak). Counts are EXCHANGES, not (exchange, chunking)
-- pairs: an exchange's verdict for a check covers every chunking judged (view
-- verdicts_by_exchange: `fixed` = old wrong under at least one chunking, new under none; `broken`
-- the reverse; `still-wrong` = both wrong identically; `changed-wrong` = both wrong, differently).
--   exchanges    exchanges the check was judged on (fixed + broken + same-ok + still-wrong + changed-wrong)
--   unreliable   of those, exchanges whose old-side replay did not reproduce what was served
--                (stream checks only; see the fidelity query); they are counted in the columns too
--   not-judged   exchanges the check could not judge: render checks where the reference side failed
--                to render (view render_not_judged; the reasons: `replay query render_failures`)
-- Per-chunking detail: `replay query verdict_exchanges` and the view verdict_pairs.
WITH
checks(check_name, ord) AS (
    VALUES ('null-leak', 0), ('prompt-divergence', 1), ('render-failure', 2), ('replay-error', 3),
           ('dropped-call', 4), ('non-json-join', 5), ('argument-mismatch', 6), ('content-leak', 7)
)
SELECT
    k.check_name AS "check",
    count(v.verdict) FILTER (WHERE v.verdict = 'fixed') AS "fixed",
    count(v.verdict) FILTER (WHERE v.verdict = 'broken') AS "broken",
    count(v.verdict) FILTER (WHERE v.verdict = 'same-ok') AS "same-ok",
    count(v.verdict) FILTER (WHERE v.verdict = 'still-wrong') AS "still-wrong",
    count(v.verdict) FILTER (WHERE v.verdict = 'changed-wrong') AS "changed-wrong",
    count(v.verdict) FILTER (WHERE v.unreliable) AS unreliable,
    count(v.verdict) AS exchanges,
    (SELECT count(*) FROM render_not_judged n WHERE n."check" = k.check_name) AS "not-judged"
FROM checks k
LEFT JOIN verdicts_by_exchange v ON v."check" = k.check_name
GROUP BY k.check_name, k.ord
ORDER BY k.ord
