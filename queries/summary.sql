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
--                                  (served: of the raw completions of exchanges with a captured response
--                                  or stream, the calls calls_dropped is counted over; null when none has one)
--   calls_dropped                  of those, calls missing from at least one of the side's replays
--                                  (served: missing from what the client received)
--   non_json_joins                 calls whose joined arguments are not a JSON object under at least one replay
--   argument_mismatches            calls whose joined arguments parse but differ (name or JSON value)
--                                  from the reference under at least one replay
-- A count is null where it does not apply to that side, where its stage has not run (a run made by
-- `replay ingest` alone has no renders and no streams), and where there was nothing to judge: a count
-- of faults is a number only over at least one item judged (schemas_with_leaked_null: a schema the
-- side serialized; prompts_*: a prompt it rendered (and the reference rendered); render_failures: a
-- render; calls_dropped: a reference call in an exchange replayed (served: in an exchange with a
-- captured response or stream); non_json_joins: a call the side streamed (served: the client
-- assembled); argument_mismatches: one of those calls whose arguments are JSON (served: with a
-- reference call at its index)). A capture with no served response gives null, not 0, on the served row.
-- Call counts are distinct (exchange, call index).
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
           count(*) AS render_rows,
           coalesce(sum(r.n_tools) FILTER (WHERE r.error IS NULL), 0) AS schemas_rendered,
           count(*) FILTER (WHERE r.error IS NULL) AS prompts_rendered,
           count(*) FILTER (WHERE r.error IS NULL AND ref.prompt_sha256 IS NOT NULL) AS prompts_compared
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
replayed_calls AS (  -- the denominator of calls_dropped: reference calls of the exchanges each side replayed
    SELECT s.side, count(DISTINCT (rc.exchange_id, rc.index)) AS n
    FROM (SELECT DISTINCT side, exchange_id FROM replays) s JOIN ref_calls rc ON rc.exchange_id = s.exchange_id
    GROUP BY s.side
),
bad AS (
    SELECT side,
           count(DISTINCT (exchange_id, index)) AS calls_streamed,
           count(DISTINCT (exchange_id, index)) FILTER (WHERE arguments_json_ok) AS calls_json,
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
           is_json_object(arguments) AS json_ok,  -- the non-json-join rule (replay/checks.py json_object)
           CASE WHEN coalesce(json_valid(arguments), false) THEN json(arguments) END AS args_norm
    FROM served_calls
),
served_ex AS (  -- the exchanges' served columns only (a correlated NOT EXISTS made DuckDB read
                --  every column of exchanges, request_json included: most of the query's time)
    SELECT exchange_id FROM exchanges
    WHERE served_tool_calls IS NOT NULL OR served_finish_reason IS NOT NULL OR served_content IS NOT NULL
),
served_counts AS (
    SELECT
        (SELECT count(*) FROM ref_calls rc JOIN served_ex e USING (exchange_id)) AS ref_calls_served,
        (SELECT count(*) FROM streams s JOIN served_ex e USING (exchange_id)
         WHERE s.side = 'reference' AND s.error IS NULL) AS completions_served,
        (SELECT count(*) FROM ref_calls rc JOIN served_ex e USING (exchange_id)
         ANTI JOIN served_calls s ON s.exchange_id = rc.exchange_id AND s.index = rc.index
        ) AS calls_dropped,
        (SELECT count(*) FROM served_ok) AS calls_served,
        (SELECT count(*) FROM served_ok WHERE NOT json_ok) AS non_json_joins,
        (SELECT count(*) FROM served_ok s JOIN ref_calls rc USING (exchange_id, index) WHERE s.json_ok) AS calls_compared,
        (SELECT count(*) FROM served_ok s JOIN ref_calls rc USING (exchange_id, index)
         WHERE s.json_ok AND (s.name IS DISTINCT FROM rc.name OR s.args_norm IS DISTINCT FROM json(rc.arguments))
        ) AS argument_mismatches
)
SELECT
    sides.side,
    t.exchanges,
    t.ingest_errors,
    t.tool_schemas,
    CASE WHEN sides.side = 'served' OR NOT t.rendered OR coalesce(rc.schemas_rendered, 0) = 0 THEN NULL
         ELSE coalesce(rc.schemas_with_leaked_null, 0) END::BIGINT AS schemas_with_leaked_null,
    CASE WHEN sides.side = 'served' OR NOT t.rendered OR coalesce(rc.prompts_rendered, 0) = 0 THEN NULL
         ELSE rc.prompts_with_leaked_null END::BIGINT AS prompts_with_leaked_null,
    CASE WHEN sides.side = 'reference' OR NOT t.rendered OR coalesce(rc.prompts_compared, 0) = 0 THEN NULL
         ELSE rc.prompts_diverged_from_reference END::BIGINT AS prompts_diverged_from_reference,
    CASE WHEN sides.side = 'served' OR NOT t.rendered OR coalesce(rc.render_rows, 0) = 0 THEN NULL
         ELSE rc.render_failures END::BIGINT AS render_failures,
    CASE WHEN NOT t.streamed THEN NULL
         WHEN sides.side = 'served' THEN CASE WHEN sc.completions_served > 0 THEN sc.ref_calls_served END
         ELSE t.calls_whole END::BIGINT AS calls_whole,
    CASE WHEN sides.side = 'reference' OR NOT t.streamed THEN NULL
         WHEN sides.side = 'served' THEN CASE WHEN sc.completions_served > 0 AND sc.ref_calls_served > 0 THEN sc.calls_dropped END
         WHEN coalesce(rcn.n, 0) = 0 THEN NULL
         ELSE (SELECT count(*) FROM dropped d WHERE d.side = sides.side) END::BIGINT AS calls_dropped,
    CASE WHEN sides.side = 'reference' THEN NULL
         WHEN sides.side = 'served' THEN CASE WHEN sc.calls_served > 0 THEN sc.non_json_joins END
         WHEN NOT t.streamed OR coalesce(b.calls_streamed, 0) = 0 THEN NULL
         ELSE b.non_json_joins END::BIGINT AS non_json_joins,
    CASE WHEN sides.side = 'reference' OR NOT t.streamed THEN NULL
         WHEN sides.side = 'served' THEN CASE WHEN sc.calls_compared > 0 THEN sc.argument_mismatches END
         WHEN coalesce(b.calls_json, 0) = 0 THEN NULL
         ELSE b.argument_mismatches END::BIGINT AS argument_mismatches
FROM sides
CROSS JOIN totals t
CROSS JOIN served_counts sc
LEFT JOIN render_counts rc ON rc.side = sides.side
LEFT JOIN bad b ON b.side = sides.side
LEFT JOIN replayed_calls rcn ON rcn.side = sides.side
ORDER BY sides.ord
