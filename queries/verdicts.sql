-- verdicts: per check, how many exchanges the change fixed, improved, broke, left right or left wrong
-- One row per check of the old and new sides (null-leak, prompt-divergence, render-failure,
-- replay-error, client-error, dropped-call, non-json-join, argument-mismatch, content-leak,
-- name-repeat, call-id, finish-reason, streaming-fault, semantic-diff), then one row per check of
-- the served side (`served:...`, from the captured streams and responses alone).
-- Counts are EXCHANGES, not (exchange, chunking) pairs: an exchange's verdict for a check covers
-- every chunking judged (view verdicts_by_exchange), and each exchange is in exactly one column:
--   fixed, improved, broken, same-ok, still-wrong, changed-wrong   old against new (see the view)
--   unreliable   exchanges whose old-side replay did not reproduce what was served (stream checks;
--                the fidelity query): counted here only
--   wrong        served rows only: exchanges whose served side has the fault (same-ok: it has not)
--   not-judged   exchanges in the check's scope it could not judge, each with its reason (view
--                not_judged; `replay query verdict_exchanges` lists them): the reference failed
--                (to render; its whole-text parse raised), or a side has no result to judge (it
--                failed to render: null-leak and prompt-divergence; its parser raised under every
--                chunking the check reads); null on the served rows
--   exchanges    the check's scope (render checks: every exchange rendered; stream checks: every
--                exchange re-streamed; served checks: every exchange the check applies to) = the
--                sum of the other columns: each exchange is in exactly one
-- A row whose scope is empty (exchanges 0: nothing rendered, re-streamed or served for the check)
-- has null, not 0, in every other column: nothing was judged, so no count of faults is measured.
-- streaming-fault (a side's stream differs from its own whole-text parse) and semantic-diff (its
-- whole-text parse differs from the reference's) tell a streaming fault from a semantic difference.
-- Served checks: client-error (the client SDK raised on the stream), name-repeat, call-id,
-- index-fault, non-json-join, content-leak (call markup of the family in the content),
-- finish-reason (finish_reason stop / end_turn with calls, or tool_calls without any).
-- Per-chunking detail: `replay query verdict_exchanges` and the view verdict_pairs.
-- The check list and order are the registered table `checks` (replay/checks.py), the served
-- checks' predicates its entries (expanded into `applies` and `wrong` below).
WITH
side_rows AS (
    SELECT
        k.check_name AS "check", k.ord,
        count(v.verdict) FILTER (WHERE v.verdict = 'fixed') AS "fixed",
        count(v.verdict) FILTER (WHERE v.verdict = 'improved') AS "improved",
        count(v.verdict) FILTER (WHERE v.verdict = 'broken') AS "broken",
        count(v.verdict) FILTER (WHERE v.verdict = 'same-ok') AS "same-ok",
        count(v.verdict) FILTER (WHERE v.verdict = 'still-wrong') AS "still-wrong",
        count(v.verdict) FILTER (WHERE v.verdict = 'changed-wrong') AS "changed-wrong",
        count(v.verdict) FILTER (WHERE v.verdict = 'unreliable') AS unreliable,
        NULL::BIGINT AS wrong,
        count(v.verdict) + coalesce(any_value(nj.n), 0) AS exchanges,
        coalesce(any_value(nj.n), 0) AS "not-judged"
    FROM (SELECT name AS check_name, ord FROM checks WHERE scope IN ('render', 'stream')) k
    LEFT JOIN verdicts_by_exchange v ON v."check" = k.check_name
    LEFT JOIN (SELECT "check", count(*) AS n FROM not_judged GROUP BY "check") nj ON nj."check" = k.check_name
    GROUP BY k.check_name, k.ord
),
served_checks AS (SELECT name AS check_name, ord FROM checks WHERE scope = 'served'),
served_judged AS (
    SELECT k.check_name, k.ord,
           {{checks:served_applies}} AS applies,
           {{checks:served_wrong}} AS wrong
    FROM exchanges e CROSS JOIN served_checks k
),
served_rows AS (
    SELECT
        k.check_name AS "check", k.ord,
        NULL::BIGINT AS "fixed", NULL::BIGINT AS "improved", NULL::BIGINT AS "broken",
        count(*) FILTER (WHERE j.applies AND NOT j.wrong) AS "same-ok",
        NULL::BIGINT AS "still-wrong", NULL::BIGINT AS "changed-wrong", NULL::BIGINT AS unreliable,
        count(*) FILTER (WHERE j.applies AND j.wrong) AS wrong,
        count(*) FILTER (WHERE j.applies) AS exchanges,
        NULL::BIGINT AS "not-judged"
    FROM served_checks k
    LEFT JOIN served_judged j ON j.check_name = k.check_name
    GROUP BY k.check_name, k.ord
)
SELECT "check",
       CASE WHEN exchanges > 0 THEN "fixed" END AS "fixed",
       CASE WHEN exchanges > 0 THEN "improved" END AS "improved",
       CASE WHEN exchanges > 0 THEN "broken" END AS "broken",
       CASE WHEN exchanges > 0 THEN "same-ok" END AS "same-ok",
       CASE WHEN exchanges > 0 THEN "still-wrong" END AS "still-wrong",
       CASE WHEN exchanges > 0 THEN "changed-wrong" END AS "changed-wrong",
       CASE WHEN exchanges > 0 THEN "unreliable" END AS "unreliable",
       CASE WHEN exchanges > 0 THEN "wrong" END AS "wrong",
       exchanges,
       CASE WHEN exchanges > 0 THEN "not-judged" END AS "not-judged"
FROM (SELECT * FROM side_rows UNION ALL SELECT * FROM served_rows)
ORDER BY ord
