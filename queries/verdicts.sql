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
WITH
checks(check_name, ord) AS (
    VALUES ('null-leak', 0), ('prompt-divergence', 1), ('render-failure', 2), ('replay-error', 3), ('client-error', 4),
           ('dropped-call', 5), ('non-json-join', 6), ('argument-mismatch', 7), ('content-leak', 8), ('name-repeat', 9),
           ('call-id', 10), ('finish-reason', 11), ('streaming-fault', 12), ('semantic-diff', 13)
),
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
    FROM checks k
    LEFT JOIN verdicts_by_exchange v ON v."check" = k.check_name
    LEFT JOIN (SELECT "check", count(*) AS n FROM not_judged GROUP BY "check") nj ON nj."check" = k.check_name
    GROUP BY k.check_name, k.ord
),
served_checks(check_name, ord) AS (
    VALUES ('served:client-error', 100), ('served:name-repeat', 101), ('served:call-id', 102), ('served:index-fault', 103),
           ('served:non-json-join', 104), ('served:content-leak', 105), ('served:finish-reason', 106)
),
served_judged AS (
    SELECT k.check_name, k.ord,
           CASE k.check_name
               WHEN 'served:client-error' THEN e.served_chunks IS NOT NULL
               WHEN 'served:name-repeat' THEN e.served_name_repeats IS NOT NULL
               WHEN 'served:call-id' THEN e.served_id_faults IS NOT NULL
               WHEN 'served:index-fault' THEN e.served_index_faults IS NOT NULL
               WHEN 'served:finish-reason' THEN e.served_stop_with_calls IS NOT NULL
               ELSE e.served_non_json_calls IS NOT NULL END AS applies,
           CASE k.check_name
               WHEN 'served:client-error' THEN e.served_client_error IS NOT NULL
               WHEN 'served:name-repeat' THEN e.served_name_repeats > 0
               WHEN 'served:call-id' THEN e.served_id_faults > 0
               WHEN 'served:index-fault' THEN e.served_index_faults > 0
               WHEN 'served:non-json-join' THEN e.served_non_json_calls > 0
               WHEN 'served:content-leak' THEN e.served_markup IS NOT NULL
               ELSE e.served_stop_with_calls OR (e.served_finish_reason = 'tool_calls' AND len(coalesce(e.served_tool_calls, [])) = 0) END AS wrong
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
