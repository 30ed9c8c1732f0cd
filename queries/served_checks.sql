-- served_checks: faults in what clients received, judged from the captured streams and responses alone
-- One row per capture format and route; no raw completion is needed (replay/capture/served.py).
--   exchanges           exchanges of this format and route
--   served              of those, with a captured response or stream (the others have no served side)
--   streamed            of those, captured as a stream (the name and index checks need one)
--   calls               calls the client assembled (OpenAI SDK by index, Anthropic per content
--                       block, Responses per output item)
--   non_json_calls      calls whose joined arguments are not a JSON object
--   name_repeats        a call name sent again for one index / block / item
--   index_faults        call indices that skip or go back, fragments for no open call
--   markup_in_content   exchanges whose content holds a call marker of the model's family
--   stop_with_calls     exchanges with calls and finish_reason `stop` (Messages: `end_turn`)
-- A count over nothing judged is null, not 0: every count after `streamed` is null when no exchange
-- of the group was served; name_repeats and index_faults when none was streamed (they need the
-- stream); non_json_calls when the client assembled no call.
SELECT
    coalesce(capture_format, 'v1') AS capture_format,
    route,
    count(*) AS exchanges,
    count(*) FILTER (WHERE served_non_json_calls IS NOT NULL) AS served,
    count(*) FILTER (WHERE served_chunks IS NOT NULL) AS streamed,
    CASE WHEN served > 0 THEN coalesce(sum(len(served_tool_calls)), 0) END::BIGINT AS calls,
    CASE WHEN calls > 0 THEN coalesce(sum(served_non_json_calls), 0) END::BIGINT AS non_json_calls,
    CASE WHEN count(served_name_repeats) > 0 THEN sum(served_name_repeats) END::BIGINT AS name_repeats,
    CASE WHEN count(served_index_faults) > 0 THEN sum(served_index_faults) END::BIGINT AS index_faults,
    CASE WHEN served > 0 THEN count(*) FILTER (WHERE served_markup IS NOT NULL) END AS markup_in_content,
    CASE WHEN count(served_stop_with_calls) > 0 THEN count(*) FILTER (WHERE served_stop_with_calls) END AS stop_with_calls
FROM exchanges
GROUP BY ALL
ORDER BY capture_format, route
