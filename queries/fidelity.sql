-- fidelity: how many exchanges the old side's replay did not reproduce as served
-- One row. Over exchanges with both a captured response (or stream) and a raw completion, the old
-- side's replay (the `recorded` chunking when steps were logged, else its whole-text parse) is
-- compared with what the client received (call ids ignored, arguments compared as JSON values):
--   exchanges_compared   exchanges with both
--   reproduced           the replay gives the served calls, content and finish_reason
--   not_reproduced       it does not: the verdicts of their stream checks are marked unreliable
--   calls_differ, content_differs, finish_reason_differs, replay_errors   why (an exchange may count in several)
-- `replay query --sql "SELECT * FROM fidelity_exchanges WHERE NOT faithful"` lists them.
-- With no exchange compared (no served response with a raw completion) every count but
-- exchanges_compared is null: nothing was measured, so nothing is reported as reproduced or not.
SELECT
    count(*) AS exchanges_compared,
    CASE WHEN count(*) > 0 THEN count(*) FILTER (WHERE faithful) END AS reproduced,
    CASE WHEN count(*) > 0 THEN count(*) FILTER (WHERE NOT faithful) END AS not_reproduced,
    CASE WHEN count(*) > 0 THEN count(*) FILTER (WHERE NOT replay_error AND NOT calls_equal) END AS calls_differ,
    CASE WHEN count(*) > 0 THEN count(*) FILTER (WHERE NOT replay_error AND NOT content_equal) END AS content_differs,
    CASE WHEN count(*) > 0 THEN count(*) FILTER (WHERE NOT replay_error AND NOT finish_equal) END AS finish_reason_differs,
    CASE WHEN count(*) > 0 THEN count(*) FILTER (WHERE replay_error) END AS replay_errors
FROM fidelity_exchanges
