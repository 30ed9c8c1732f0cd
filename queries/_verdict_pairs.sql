-- verdict_pairs (view): old and new judged against the reference, per exchange, check and chunking
-- One row per (exchange, check, chunking) where the check applies to both sides:
--   render checks (chunking `render`, from `renders`; judged where the reference rendered):
--     null-leak          the side's prompt carries a null the client never sent: its serialized
--                        tools have one and the prompt without the leaked keys would differ
--                        (renders.leak_in_prompt; judged where both sides rendered)
--     prompt-divergence  the side's prompt differs from the reference's (SHA-256; both rendered)
--     render-failure     the side could not serialize or render the request
--   stream checks (per chunking of `streams`, `parse` being the whole-text parse; judged where
--   the reference parsed the raw completion and the chunking could be built):
--     replay-error       the side's parser raised (or timed out)
--     dropped-call       a call index of the reference parse is missing (a replay's finish_reason is
--                        `stop` exactly when it streamed no call, so `stop` where the reference has
--                        calls is counted here too; judged where neither side raised)
--     non-json-join      a call's joined arguments are not a JSON object
--     argument-mismatch  a call's arguments parse but differ from the reference (name or JSON value),
--                        or a call the reference does not have
--     content-leak       call markup (a family marker) in the content beyond what the reference leaves
--     client-error       the client SDK raised on the side's stream (replay/assemble.py: an index that
--                        skips or goes back, a call never opened); the client got no message
--     name-repeat        a call's name came in more than one delta (the SDK concatenates the names)
--     call-id            a call has no id, an id sent in more than one delta, or another call's id
--     finish-reason      the side's finish_reason is not what its calls imply (`length` when the
--                        capture was truncated), or it closed a truncated call with invented arguments
--     streaming-fault    a streamed chunking's result differs from the side's OWN whole-text parse
--                        (judged where that parse ran; the upstream suites' invariant)
--     semantic-diff      the side's whole-text parse (chunking `parse`) differs from the reference's
--   (the per-row facts are computed by replay/judge.py; this view only pairs and counts them;
--   each check's applies/wrong/outcome/items predicate is its entry in replay/checks.py, expanded
--   into the two lists of checks below)
-- old_wrong / new_wrong: the side is wrong; old_outcome / new_outcome: what it got wrong (leaked null
-- paths, prompt SHA-256, error text, missing call indexes and finish_reason, the offending calls'
-- index/name/arguments, the content where it leaks); two wrong sides with different outcomes are `changed-wrong`.
-- old_deltas / new_deltas: deltas fed under that chunking (0 for `parse` and `render`).
-- old_items / new_items: null-leak only: the leaked null paths (an `improved` verdict compares them).
-- unreliable: a stream check on an exchange whose old-side replay did not reproduce what was
-- served (view fidelity_exchanges).
WITH
-- Memory (a 20k-exchange run has 400k streams rows; replay's DuckDB limit is 256 MB by default):
-- each side's row carries its checks as a list of (check, applies, wrong, outcome) in one order, old
-- and new rows are paired by (exchange, chunking) and only then are the two lists unnested side by
-- side, so the pairing join holds 200k narrow rows, not 2M (a CROSS JOIN per check, then a self-join,
-- needed over 512 MB). Each join's right side is the one DuckDB should build its hash table from
-- (the smaller); replay.sql.connect keeps DuckDB from reordering them, since two large hash tables
-- in one pipeline do not spill together.
ref_render AS (SELECT exchange_id, prompt_sha256, prompt_ids_sha256 FROM renders WHERE side = 'reference' AND error IS NULL),
render_sides AS (
    SELECT r.exchange_id, r.side, 'render' AS chunking, 0 AS n_deltas,
           {{checks:render}} AS checks
    FROM (  -- the leaked null paths, sorted, computed once (the outcome is their text)
        SELECT *, CASE WHEN coalesce(leak_in_prompt, true) THEN list_sort([x.tool_index::VARCHAR || x.path FOR x IN leaked_nulls]) END AS leaked
        FROM renders WHERE side IN ('old', 'new')
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
        FROM calls WHERE side IN ('old', 'new')
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
        WHERE side IN ('old', 'new') AND (NOT arguments_json_ok OR NOT coalesce(matches_whole, false) OR names_sent > 1 OR id_fault)
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
        WHERE side IN ('old', 'new') AND NOT starts_with(coalesce(error, ''), 'chunking:')
    ) s
    JOIN ref_parse USING (exchange_id)
    LEFT JOIN ref_calls rc USING (exchange_id)
    LEFT JOIN side_calls sc USING (exchange_id, side, chunking)
),
stream_sides AS (
    SELECT r.exchange_id, r.side, r.chunking, r.n_deltas,
           {{checks:stream}} AS checks
    FROM rows r
),
sides AS NOT MATERIALIZED (SELECT * FROM render_sides UNION ALL SELECT * FROM stream_sides),
paired AS (
    SELECT o.exchange_id, o.chunking, o.n_deltas AS old_deltas, n.n_deltas AS new_deltas, o.checks AS old_checks, n.checks AS new_checks
    FROM sides o
    JOIN sides n ON n.exchange_id = o.exchange_id AND n.chunking = o.chunking
    WHERE o.side = 'old' AND n.side = 'new'
),
judged AS (
    SELECT exchange_id, chunking, old_deltas, new_deltas, unnest(old_checks) AS o, unnest(new_checks) AS n
    FROM paired
),
unfaithful AS (SELECT exchange_id FROM fidelity_exchanges WHERE NOT faithful)
SELECT
    j.exchange_id,
    j.o.c AS "check",
    j.chunking,
    j.old_deltas,
    j.new_deltas,
    j.o.wrong AS old_wrong,
    j.n.wrong AS new_wrong,
    j.o.outcome AS old_outcome,
    j.n.outcome AS new_outcome,
    j.o.items AS old_items,
    j.n.items AS new_items,
    CASE WHEN NOT j.o.wrong AND NOT j.n.wrong THEN 'same-ok'
         WHEN j.o.wrong AND NOT j.n.wrong THEN 'fixed'
         WHEN NOT j.o.wrong AND j.n.wrong THEN 'broken'
         WHEN j.o.outcome IS NOT DISTINCT FROM j.n.outcome THEN 'still-wrong'
         ELSE 'changed-wrong' END AS verdict,
    (j.chunking <> 'render' AND j.exchange_id IN (SELECT exchange_id FROM unfaithful)) AS unreliable
FROM judged j
WHERE j.o.applies AND j.n.applies
