-- summary: the headline counts of a run, one row per side
-- One row for each side (served, old, new, reference) with exactly these columns:
--   exchanges, ingest_errors       the run's totals (the same on every row)
--   tool_schemas                   tool declarations in the requests
--   schemas_with_leaked_null       serialized tool schemas with a null the client never sent
--   prompts_with_leaked_null       rendered prompts a leaked null reaches: the prompt rendered without
--                                  the leaked keys would differ (renders.leak_in_prompt; a template that
--                                  renders no tools carries none)
--   prompts_diverged_from_reference  prompts whose SHA-256 differs from the reference side's
--                                  (served: the logged server prompt, when the renderer is a chat template
--                                  or a reference encoder is set); by token ids when both sides have them
--   render_failures                requests the side could not serialize or render
--   calls_whole                    calls in the reference whole-text parse of every raw completion
--   calls_dropped                  of those, calls missing from at least one of the side's replays
--                                  (served: missing from what the client received)
--   non_json_joins                 calls whose joined arguments are not a JSON object under at least one replay
--   argument_mismatches            calls whose joined arguments parse but differ (name or JSON value)
--                                  from the reference under at least one replay
-- A count is null where it does not apply to that side, and where its stage has not run
-- (a run made by `replay ingest` alone has no renders and no streams). Call counts are distinct (exchange, call index).
WITH
sides(side, ord) AS (VALUES ('served', 0), ('old', 1), ('new', 2), ('reference', 3)),
totals AS (
    SELECT (SELECT count(*) FROM exchanges) AS exchanges,
           (SELECT count(*) FROM ingest_errors) AS ingest_errors,
           (SELECT count(*) FROM tools) AS tool_schemas,
           (SELECT count(*) FROM calls WHERE side = 'reference') AS calls_whole,
           (SELECT count(*) > 0 FROM renders) AS rendered,
           (SELECT count(*) > 0 FROM streams) AS streamed
),
ref AS (SELECT * FROM renders WHERE side = 'reference' AND error IS NULL),
render_counts AS (
    SELECT r.side,
           sum(r.schemas_with_leaked_null) FILTER (WHERE r.error IS NULL) AS schemas_with_leaked_null,
           count(*) FILTER (WHERE r.error IS NULL AND coalesce(r.leak_in_prompt, len(r.leaked_nulls) > 0)) AS prompts_with_leaked_null,
           count(*) FILTER (WHERE r.error IS NULL AND ref.prompt_sha256 IS NOT NULL
                            AND CASE WHEN r.prompt_ids_sha256 IS NOT NULL AND ref.prompt_ids_sha256 IS NOT NULL
                                     THEN r.prompt_ids_sha256 <> ref.prompt_ids_sha256
                                     ELSE r.prompt_sha256 <> ref.prompt_sha256 END) AS prompts_diverged_from_reference,
           count(*) FILTER (WHERE r.error IS NOT NULL) AS render_failures,
           count(*) AS render_rows
    FROM renders r LEFT JOIN ref ON ref.exchange_id = r.exchange_id
    GROUP BY r.side
),
ref_calls AS (SELECT exchange_id, index, name, arguments FROM calls WHERE side = 'reference'),
replays AS (SELECT * FROM streams WHERE side IN ('old', 'new') AND error IS NULL),
dropped AS (
    SELECT DISTINCT s.side, rc.exchange_id, rc.index
    FROM replays s JOIN ref_calls rc ON rc.exchange_id = s.exchange_id
    ANTI JOIN calls c ON c.exchange_id = s.exchange_id AND c.side = s.side
                     AND c.chunking = s.chunking AND c.index = rc.index
),
bad AS (
    SELECT side,
           count(DISTINCT (exchange_id, index)) FILTER (WHERE NOT arguments_json_ok) AS non_json_joins,
           count(DISTINCT (exchange_id, index)) FILTER (WHERE arguments_json_ok AND NOT matches_whole) AS argument_mismatches
    FROM calls WHERE side IN ('old', 'new')
    GROUP BY side
),
served_calls AS (
    SELECT e.exchange_id, c.index, c.name, c.arguments
    FROM exchanges e, unnest(e.served_tool_calls) AS u(c)
),
served_ok AS (
    SELECT *,
           coalesce(CASE WHEN json_valid(arguments) THEN json_type(arguments) = 'OBJECT' END, false) AS json_ok,
           CASE WHEN coalesce(json_valid(arguments), false) THEN json(arguments) END AS args_norm
    FROM served_calls
),
served_counts AS (
    SELECT
        -- an anti join on the exchanges' served columns only (a correlated NOT EXISTS made DuckDB read
        -- every column of exchanges, request_json included: most of the query's time)
        (SELECT count(*) FROM ref_calls rc
         JOIN (SELECT exchange_id FROM exchanges
               WHERE served_tool_calls IS NOT NULL OR served_finish_reason IS NOT NULL OR served_content IS NOT NULL) e USING (exchange_id)
         ANTI JOIN served_calls s ON s.exchange_id = rc.exchange_id AND s.index = rc.index
        ) AS calls_dropped,
        (SELECT count(*) FROM served_ok WHERE NOT json_ok) AS non_json_joins,
        (SELECT count(*) FROM served_ok s JOIN ref_calls rc USING (exchange_id, index)
         WHERE s.json_ok AND (s.name IS DISTINCT FROM rc.name OR s.args_norm IS DISTINCT FROM json(rc.arguments))
        ) AS argument_mismatches
)
SELECT
    sides.side,
    t.exchanges,
    t.ingest_errors,
    t.tool_schemas,
    CASE WHEN sides.side = 'served' THEN NULL ELSE coalesce(rc.schemas_with_leaked_null, 0) END::BIGINT * CASE WHEN t.rendered THEN 1 END AS schemas_with_leaked_null,
    CASE WHEN sides.side = 'served' THEN NULL ELSE coalesce(rc.prompts_with_leaked_null, 0) END::BIGINT * CASE WHEN t.rendered THEN 1 END AS prompts_with_leaked_null,
    CASE WHEN sides.side = 'reference' THEN NULL
         WHEN sides.side = 'served' AND rc.render_rows IS NULL THEN NULL
         ELSE coalesce(rc.prompts_diverged_from_reference, 0) END::BIGINT * CASE WHEN t.rendered THEN 1 END AS prompts_diverged_from_reference,
    CASE WHEN sides.side = 'served' THEN NULL ELSE coalesce(rc.render_failures, 0) END::BIGINT * CASE WHEN t.rendered THEN 1 END AS render_failures,
    t.calls_whole::BIGINT * CASE WHEN t.streamed THEN 1 END AS calls_whole,
    CASE WHEN sides.side = 'reference' THEN NULL
         WHEN sides.side = 'served' AND NOT t.streamed THEN NULL
         WHEN sides.side = 'served' THEN sc.calls_dropped
         ELSE (SELECT count(*) FROM dropped d WHERE d.side = sides.side) END::BIGINT * CASE WHEN t.streamed THEN 1 END AS calls_dropped,
    CASE WHEN sides.side = 'reference' THEN NULL
         WHEN sides.side = 'served' THEN sc.non_json_joins
         WHEN NOT t.streamed THEN NULL
         ELSE coalesce(b.non_json_joins, 0) END::BIGINT AS non_json_joins,
    CASE WHEN sides.side = 'reference' THEN NULL
         WHEN sides.side = 'served' AND NOT t.streamed THEN NULL
         WHEN sides.side = 'served' THEN sc.argument_mismatches
         WHEN NOT t.streamed THEN NULL
         ELSE coalesce(b.argument_mismatches, 0) END::BIGINT AS argument_mismatches
FROM sides
CROSS JOIN totals t
CROSS JOIN served_counts sc
LEFT JOIN render_counts rc ON rc.side = sides.side
LEFT JOIN bad b ON b.side = sides.side
ORDER BY sides.ord
