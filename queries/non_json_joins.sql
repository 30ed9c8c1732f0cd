-- non_json_joins: calls whose streamed argument fragments, joined by index as the OpenAI SDK joins them, are not JSON
-- One row per side and chunking. `served` is what the client received in the captured stream or
-- response (chunking `served`); old and new are replays of the raw completion.
--   calls               calls the client assembled
--   non_json_joins      calls whose joined arguments are not a JSON object (raw model text before the
--                       parsed JSON, truncated text, empty string)
--   empty_arguments     of those, calls whose joined arguments are the empty string
--   argument_mismatches calls whose arguments parse but differ from the reference whole-text parse
--                       (name, or JSON value) at the same index
--                       (null where no such call has a reference call to compare with: a served
--                       side without a raw completion compares nothing)
WITH
ref_calls AS (SELECT exchange_id, index, name, arguments FROM calls WHERE side = 'reference'),
served AS (
    SELECT e.exchange_id, c.index, c.name, c.arguments
    FROM exchanges e, unnest(e.served_tool_calls) AS u(c)
),
served_judged AS (
    SELECT 'served' AS side, 'served' AS chunking, s.exchange_id, s.index, s.arguments,
           is_json_object(s.arguments) AS json_ok,  -- the non-json-join rule (replay/checks.py json_object)
           CASE WHEN rc.exchange_id IS NULL THEN NULL
                ELSE rc.name IS NOT DISTINCT FROM s.name
                     AND (CASE WHEN coalesce(json_valid(s.arguments), false) THEN json(s.arguments) END)
                         IS NOT DISTINCT FROM json(rc.arguments) END AS matches
    FROM served s LEFT JOIN ref_calls rc USING (exchange_id, index)
),
replayed AS (
    SELECT side, chunking, exchange_id, index, arguments, arguments_json_ok AS json_ok, matches_whole AS matches
    FROM calls WHERE side IN ('old', 'new')
),
judged AS (SELECT * FROM served_judged UNION ALL SELECT * FROM replayed)
SELECT
    side,
    chunking,
    count(*) AS calls,
    count(*) FILTER (WHERE NOT json_ok) AS non_json_joins,
    count(*) FILTER (WHERE arguments = '' OR arguments IS NULL) AS empty_arguments,
    CASE WHEN count(*) FILTER (WHERE json_ok AND matches IS NOT NULL) > 0
         THEN count(*) FILTER (WHERE json_ok AND matches = false) END AS argument_mismatches
FROM judged
GROUP BY side, chunking
ORDER BY CASE side WHEN 'served' THEN 0 WHEN 'old' THEN 1 ELSE 2 END,
         CASE chunking WHEN 'parse' THEN 0 WHEN 'recorded' THEN 1 WHEN 'whole' THEN 2 WHEN 'char' THEN 3 ELSE 4 END,
         length(chunking), chunking
