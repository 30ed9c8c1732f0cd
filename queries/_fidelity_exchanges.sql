-- fidelity_exchanges (view): does the old side's replay reproduce what the client was served?
-- One row per exchange that has both a served response (or stream) and a raw completion, and an
-- old-side replay row (none before `replay stream` runs, nor when no parser family applies).
-- The old side is replayed under the `recorded` chunking when the server logged its steps (and the
-- run replayed them: they join to the completion), else its whole-text parse (chunking `parse`), and compared with what the client
-- received, as the OpenAI SDK assembles it:
--   calls_equal     same calls by index: name, and arguments as JSON values (key order and spacing
--                   ignored; text that is not JSON compared as text); call ids are ignored
--   content_equal   same content, whitespace at either end ignored (servers differ in stripping the
--                   text around call blocks; null and "" are the same)
--   finish_equal    same finish_reason; only `stop` and `tool_calls` are compared (a served `length`
--                   or a missing finish_reason is not something a replay of the parser can produce)
--   replay_error    the old side's replay raised: not reproduced
--   faithful        all of the above hold
-- Verdicts of stream checks on an exchange that is not faithful are marked unreliable.
WITH
served AS (
    SELECT exchange_id, served_content, served_finish_reason, served_tool_calls, server_steps IS NOT NULL AS has_steps
    FROM exchanges
    WHERE server_output_text IS NOT NULL
      AND (served_tool_calls IS NOT NULL OR served_finish_reason IS NOT NULL OR served_content IS NOT NULL)
),
old_rows AS (
    SELECT s.*, row_number() OVER (PARTITION BY s.exchange_id ORDER BY CASE s.chunking WHEN 'recorded' THEN 0 ELSE 1 END) AS pick
    FROM streams s JOIN served USING (exchange_id)
    WHERE s.side = 'old' AND NOT starts_with(coalesce(s.error, ''), 'chunking:')
      AND (s.chunking = 'parse' OR (s.chunking = 'recorded' AND served.has_steps))
),
old_pick AS (SELECT * FROM old_rows WHERE pick = 1),
served_calls AS (
    SELECT s.exchange_id,
           list(struct_pack(i := c.index, n := c.name, a := coalesce(canonical_json(c.arguments), c.arguments)) ORDER BY c.index) AS calls
    FROM served s, unnest(s.served_tool_calls) AS u(c)
    GROUP BY s.exchange_id
),
old_calls AS (
    SELECT c.exchange_id,
           list(struct_pack(i := c.index, n := c.name, a := coalesce(canonical_json(c.arguments), c.arguments)) ORDER BY c.index) AS calls
    FROM calls c JOIN old_pick o ON o.exchange_id = c.exchange_id AND o.chunking = c.chunking
    WHERE c.side = 'old'
    GROUP BY c.exchange_id
)
SELECT
    s.exchange_id,
    o.chunking AS replay_chunking,
    o.error IS NOT NULL AS replay_error,
    coalesce(sc.calls, []) IS NOT DISTINCT FROM coalesce(oc.calls, []) AS calls_equal,
    trim(coalesce(s.served_content, ''), E' \t\n\r') = trim(coalesce(o.content, ''), E' \t\n\r') AS content_equal,
    (s.served_finish_reason NOT IN ('stop', 'tool_calls') OR s.served_finish_reason IS NULL
     OR s.served_finish_reason = o.finish_reason) AS finish_equal,
    (o.error IS NULL
     AND coalesce(sc.calls, []) IS NOT DISTINCT FROM coalesce(oc.calls, [])
     AND trim(coalesce(s.served_content, ''), E' \t\n\r') = trim(coalesce(o.content, ''), E' \t\n\r')
     AND (s.served_finish_reason NOT IN ('stop', 'tool_calls') OR s.served_finish_reason IS NULL
          OR s.served_finish_reason = o.finish_reason)) AS faithful
FROM served s
JOIN old_pick o USING (exchange_id)
LEFT JOIN served_calls sc USING (exchange_id)
LEFT JOIN old_calls oc USING (exchange_id)
