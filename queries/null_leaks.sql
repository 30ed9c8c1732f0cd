-- null_leaks: tool schemas and prompts carrying a null the client never sent, by side and field
-- A leaked null is a null in the serialized tool declaration at a JSON path where the client's
-- declaration has none (`"strict": null` written by a pydantic model_dump(), for instance).
-- A null the client wrote itself (`"default": null` inside `parameters`) is not a leak.
--   field             the path inside the tool, without `$.function.` (strict, description, parameters, ...)
--   schemas_leaking   tool schemas (exchange, tool) with a leaked null at that field
--   prompts_leaking   prompts (exchanges) with at least one
--   tool_schemas      tool schemas this side serialized without error (the denominator)
WITH
leaks AS (
    SELECT side, exchange_id, unnest(leaked_nulls, recursive := true)
    FROM renders WHERE error IS NULL
),
denominators AS (
    SELECT side, sum(n_tools)::BIGINT AS tool_schemas, count(*) AS prompts FROM renders WHERE error IS NULL GROUP BY side
),
fields AS (  -- the field of each distinct path, computed once per path (not once per leak)
    SELECT path, regexp_replace(path, '^\$\.function\.', '') AS field FROM (SELECT DISTINCT path FROM leaks)
)
SELECT
    l.side,
    f.field,
    count(DISTINCT (l.exchange_id, l.tool_index)) AS schemas_leaking,
    count(DISTINCT l.exchange_id) AS prompts_leaking,
    d.tool_schemas,
    d.prompts
FROM leaks l JOIN denominators d USING (side) JOIN fields f USING (path)
GROUP BY l.side, f.field, d.tool_schemas, d.prompts
ORDER BY CASE l.side WHEN 'old' THEN 0 WHEN 'new' THEN 1 ELSE 2 END, schemas_leaking DESC, field
