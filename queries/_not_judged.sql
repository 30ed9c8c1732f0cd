-- not_judged (view): exchanges a check applies to but could not judge, with the reason
-- One row per (exchange, check) that is in the check's scope and has no verdict in
-- verdicts_by_exchange, so that each verdict row of `replay query verdicts` counts every
-- exchange of its scope exactly once (the verdict columns plus `not-judged` sum to `exchanges`).
-- Scope: the render checks (null-leak, prompt-divergence, render-failure) cover every exchange
-- the render stage rendered (it has a reference `renders` row); the stream checks cover every
-- exchange re-streamed (it has the reference's whole-text parse row, chunking `parse`).
-- Columns: exchange_id, check, reason. The reason names who failed, first match wins:
--   `reference failed to render: E` / `reference parse failed: E`   nothing to judge against
--   `old and new failed to render: E`, `old failed to render: E`, `new failed to render: E`
--        null-leak and prompt-divergence need the side's prompt (render-failure judges these)
--   `old and new parser raised: E`, `old parser raised: E`, `new parser raised: E`
--        the check needs a side's result under a chunking where it raised (replay-error judges these)
--   `no chunking both sides replayed`   otherwise (the sides' chunkings could not be built)
-- E is that side's error (renders.error; for a parser, the first raised by chunking name).
-- view render_not_judged keeps only the render checks whose reference failed.
WITH
render_checks AS (SELECT name AS check_name FROM checks WHERE scope = 'render'),  -- the registry (replay/checks.py)
stream_checks AS (SELECT name AS check_name FROM checks WHERE scope = 'stream'),
rendered AS (
    SELECT exchange_id,
           first(error) FILTER (WHERE side = 'reference') AS ref_error,
           first(error) FILTER (WHERE side = 'old') AS old_error,
           first(error) FILTER (WHERE side = 'new') AS new_error
    FROM renders
    WHERE side IN ('old', 'new', 'reference')
    GROUP BY exchange_id
    HAVING count(*) FILTER (WHERE side = 'reference') > 0
),
render_scope AS (
    SELECT r.exchange_id, k.check_name AS "check",
           CASE WHEN r.ref_error IS NOT NULL THEN 'reference failed to render: ' || r.ref_error
                WHEN r.old_error IS NOT NULL AND r.new_error IS NOT NULL THEN 'old and new failed to render: ' || r.old_error
                WHEN r.old_error IS NOT NULL THEN 'old failed to render: ' || r.old_error
                WHEN r.new_error IS NOT NULL THEN 'new failed to render: ' || r.new_error
                ELSE 'no chunking both sides replayed' END AS reason
    FROM rendered r CROSS JOIN render_checks k
),
streamed AS (
    SELECT exchange_id,
           first(error) FILTER (WHERE side = 'reference' AND chunking = 'parse') AS ref_error,
           first(error ORDER BY chunking) FILTER (WHERE side = 'old' AND NOT starts_with(error, 'chunking:')) AS old_error,
           first(error ORDER BY chunking) FILTER (WHERE side = 'new' AND NOT starts_with(error, 'chunking:')) AS new_error
    FROM streams
    WHERE side IN ('old', 'new', 'reference')
    GROUP BY exchange_id
    HAVING count(*) FILTER (WHERE side = 'reference' AND chunking = 'parse') > 0
),
stream_scope AS (
    SELECT s.exchange_id, k.check_name AS "check",
           CASE WHEN s.ref_error IS NOT NULL THEN 'reference parse failed: ' || s.ref_error
                WHEN s.old_error IS NOT NULL AND s.new_error IS NOT NULL THEN 'old and new parser raised: ' || s.old_error
                WHEN s.old_error IS NOT NULL THEN 'old parser raised: ' || s.old_error
                WHEN s.new_error IS NOT NULL THEN 'new parser raised: ' || s.new_error
                ELSE 'no chunking both sides replayed' END AS reason
    FROM streamed s CROSS JOIN stream_checks k
),
scope AS (SELECT * FROM render_scope UNION ALL SELECT * FROM stream_scope)
SELECT s.exchange_id, s."check", s.reason
FROM scope s
ANTI JOIN verdicts_by_exchange v ON v.exchange_id = s.exchange_id AND v."check" = s."check"
