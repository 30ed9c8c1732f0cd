-- family_mismatch: exchanges whose completions hold another tool-parser family's calls than the family picked for them
-- One row per (model, family picked, family the text looks like), from `family_fit`
-- (replay/family_fit.py): the raw completion (or, without one, the served content) holds the
-- call-start markers of `looks_like` (its declared `call_starts`: <tool_call>, [TOOL_CALLS], ...)
-- and none of `family`'s (the --parser family, else the one the model name picks; null: no family
-- matched the model name), and `looks_like`'s whole-text parse finds more calls there. The audit
-- judged these exchanges with the wrong parser: re-run with --parser LOOKS_LIKE.
--   exchanges      exchanges of this model that look like `looks_like`
--   of_model       exchanges of this model looked at (a raw completion or served content)
--   calls_found    calls `looks_like`'s whole-text parse finds in them, in all
--   calls_picked   calls the picked family's whole-text parse finds in them, in all
--   marker         the call-start marker found most often
--   from_content   of `exchanges`, how many were judged on served content (no raw completion)
--   example        one exchange id
WITH m AS (SELECT model, count(*) AS of_model FROM family_fit GROUP BY model)
SELECT
    f.model,
    f.family,
    f.looks_like,
    count(*) AS exchanges,
    any_value(m.of_model) AS of_model,
    sum(f.looks_like_calls)::BIGINT AS calls_found,
    coalesce(sum(f.family_calls), 0)::BIGINT AS calls_picked,
    mode(f.looks_like_marker) AS marker,
    count(*) FILTER (WHERE f.text_source = 'served_content') AS from_content,
    min(f.exchange_id) AS example
FROM family_fit f JOIN m ON f.model IS NOT DISTINCT FROM m.model
WHERE f.looks_like IS NOT NULL
GROUP BY f.model, f.family, f.looks_like
ORDER BY exchanges DESC, f.model NULLS LAST, f.looks_like
