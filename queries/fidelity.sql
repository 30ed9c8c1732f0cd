-- fidelity: how many exchanges the old side's replay did not reproduce as served
-- One row. Over exchanges with both a captured response (or stream) and a raw completion, the old
-- side's replay (the `recorded` chunking when steps were logged, else its whole-text parse) is
-- compared with what the client received (call ids ignored, arguments compared as JSON values):
--   exchanges_compared   exchanges with both
--   reproduced           the replay gives the served calls, content and finish_reason
--   not_reproduced       it does not: the verdicts of their stream checks are marked unreliable
--   calls_differ, content_differs, finish_reason_differs, replay_errors   why (an exchange may count in several)
-- `replay query --sql "SELECT * FROM fidelity_exchanges WHERE NOT faithful"` lists them.
SELECT
    count(*) AS exchanges_compared,
    count(*) FILTER (WHERE faithful) AS reproduced,
    count(*) FILTER (WHERE NOT faithful) AS not_reproduced,
    count(*) FILTER (WHERE NOT replay_error AND NOT calls_equal) AS calls_differ,
    count(*) FILTER (WHERE NOT replay_error AND NOT content_equal) AS content_differs,
    count(*) FILTER (WHERE NOT replay_error AND NOT finish_equal) AS finish_reason_differs,
    count(*) FILTER (WHERE replay_error) AS replay_errors
FROM fidelity_exchanges
