-- side_checks (view): every side but the reference and the served one, judged against the reference
-- One row per (exchange, side, chunking): `render` (from `renders`, where the reference rendered)
-- and each chunking of `streams` (`parse` being the whole-text parse, where the reference parsed
-- the raw completion and the chunking could be built), with `checks`: the list of
-- (c, applies, wrong, outcome, items) of every render or stream check, in the registry's order
-- (replay/checks.py, expanded from its render and stream check markers; the per-row
-- facts are computed by replay/judge.py). n_deltas: deltas fed under that chunking (0 for `parse`
-- and `render`). verdict_pairs pairs an audit's old and new rows; side_states judges each side
-- (replay matrix's named sides) on its own.
-- Memory: each side's row carries its checks as one list, unnested only after verdict_pairs has
-- paired the rows (see there).
WITH
ref_render AS (SELECT exchange_id, prompt_sha256, prompt_ids_sha256 FROM renders WHERE side = 'reference' AND error IS NULL),
render_sides AS (
    SELECT r.exchange_id, r.side, 'render' AS chunking, 0 AS n_deltas,
           {{checks:render}} AS checks
    FROM (  -- the leaked null paths, sorted, computed once (the outcome is their text)
        SELECT *, CASE WHEN coalesce(leak_in_prompt, true) THEN list_sort([x.tool_index::VARCHAR || x.path FOR x IN leaked_nulls]) END AS leaked
        FROM renders WHERE side NOT IN ('reference', 'served')
    ) r
    JOIN ref_render ref USING (exchange_id)
),
ref_parse AS (SELECT exchange_id FROM streams WHERE side = 'reference' AND chunking = 'parse' AND error IS NULL),
ref_calls AS (SELECT exchange_id, list_sort(list(index)) AS idx FROM calls WHERE side = 'reference' GROUP BY exchange_id),
side_calls AS (
    -- every call's index and a digest of (name, arguments) in index order (list_sort of (index, name,
    -- arguments): an ORDER BY inside the aggregate sorts per group and cost a third of this view);
    -- the lists of faulty calls from the few calls that have a fault (most groups have none)
    SELECT a.exchange_id, a.side, a.chunking, a.idx, f.bad_json, f.mismatched, f.repeated, f.bad_ids, a.calls_key
    FROM (
        SELECT exchange_id, side, chunking, list(index) AS idx,
               sum(hash(index, name, arguments))::VARCHAR
                   AS calls_key  -- a digest: rows stay narrow
        FROM calls WHERE side NOT IN ('reference', 'served')
        GROUP BY exchange_id, side, chunking
    ) a
    LEFT JOIN (
        SELECT exchange_id, side, chunking,
               list(struct_pack(i := index, a := arguments) ORDER BY index) FILTER (WHERE NOT arguments_json_ok) AS bad_json,
               list(struct_pack(i := index, n := name, a := arguments) ORDER BY index)
                   FILTER (WHERE arguments_json_ok AND NOT coalesce(matches_whole, false)) AS mismatched,
               list(struct_pack(i := index, n := name) ORDER BY index) FILTER (WHERE names_sent > 1) AS repeated,
               list(struct_pack(i := index, id := id) ORDER BY index) FILTER (WHERE id_fault) AS bad_ids
        FROM calls
        WHERE side NOT IN ('reference', 'served') AND (NOT arguments_json_ok OR NOT coalesce(matches_whole, false) OR names_sent > 1 OR id_fault)
        GROUP BY exchange_id, side, chunking
    ) f USING (exchange_id, side, chunking)
),
rows AS (
    SELECT s.exchange_id, s.side, s.chunking, coalesce(s.n_deltas, 0) AS n_deltas, s.error IS NOT NULL AS raised, s.error,
           s.finish_reason, s.calls_whole, s.content, s.content_leak,
           [i FOR i IN coalesce(rc.idx, []) IF NOT list_contains(coalesce(sc.idx, []), i)] AS missing,
           sc.bad_json, sc.mismatched, sc.repeated, sc.bad_ids, coalesce(sc.calls_key, '') AS calls_key, s.content_key,
           s.client_error, s.name_repeats, s.id_faults, s.finish_fault, s.differs_from_reference, s.differs_from_own_parse
    FROM (  -- the content only where it leaks markup (the content-leak outcome): every row below carries it
        SELECT exchange_id, side, chunking, n_deltas, error, finish_reason, calls_whole, coalesce(content_leak, false) AS content_leak,
               CASE WHEN content_leak THEN content END AS content, md5(coalesce(content, '')) AS content_key,
               client_error, coalesce(name_repeats, 0) AS name_repeats, coalesce(id_faults, 0) AS id_faults,
               coalesce(finish_fault, false) AS finish_fault, coalesce(differs_from_reference, false) AS differs_from_reference,
               differs_from_own_parse
        FROM streams
        WHERE side NOT IN ('reference', 'served') AND NOT starts_with(coalesce(error, ''), 'chunking:')
    ) s
    JOIN ref_parse USING (exchange_id)
    LEFT JOIN ref_calls rc USING (exchange_id)
    LEFT JOIN side_calls sc USING (exchange_id, side, chunking)
),
stream_sides AS (
    SELECT r.exchange_id, r.side, r.chunking, r.n_deltas,
           {{checks:stream}} AS checks
    FROM rows r
)
SELECT * FROM render_sides UNION ALL SELECT * FROM stream_sides
