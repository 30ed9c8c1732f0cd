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
--   (the per-row facts are computed by replay/judge.py; this view only pairs and counts them)
-- old_wrong / new_wrong: the side is wrong; old_outcome / new_outcome: what it got wrong (leaked null
-- paths, prompt SHA-256, error text, missing call indexes and finish_reason, the offending calls'
-- index/name/arguments, the content); two wrong sides with different outcomes are `changed-wrong`.
-- old_deltas / new_deltas: deltas fed under that chunking (0 for `parse` and `render`).
-- old_items / new_items: null-leak only: the leaked null paths (an `improved` verdict compares them).
-- unreliable: a stream check on an exchange whose old-side replay did not reproduce what was
-- served (view fidelity_exchanges).
WITH
ref_render AS (SELECT exchange_id, prompt_sha256 FROM renders WHERE side = 'reference' AND error IS NULL),
render_checks(check_name) AS (VALUES ('null-leak'), ('prompt-divergence'), ('render-failure')),
render_judged AS (
    SELECT r.exchange_id, r.side, k.check_name, 'render' AS chunking, 0 AS n_deltas,
           CASE WHEN k.check_name = 'null-leak' THEN list_sort([x.tool_index::VARCHAR || x.path FOR x IN r.leaked_nulls]) END AS items,
           CASE k.check_name
               WHEN 'null-leak' THEN r.error IS NULL
               WHEN 'prompt-divergence' THEN r.error IS NULL AND ref.prompt_sha256 IS NOT NULL
               ELSE true END AS applies,
           CASE k.check_name
               WHEN 'null-leak' THEN coalesce(r.leak_in_prompt, len(r.leaked_nulls) > 0)
               WHEN 'prompt-divergence' THEN r.prompt_sha256 IS DISTINCT FROM ref.prompt_sha256
               ELSE r.error IS NOT NULL END AS wrong,
           CASE k.check_name
               WHEN 'null-leak' THEN CASE WHEN coalesce(r.leak_in_prompt, true) THEN list_sort([x.tool_index::VARCHAR || x.path FOR x IN r.leaked_nulls])::VARCHAR END
               WHEN 'prompt-divergence' THEN r.prompt_sha256
               ELSE r.error END AS outcome
    FROM renders r
    JOIN ref_render ref USING (exchange_id)
    CROSS JOIN render_checks k
    WHERE r.side IN ('old', 'new')
),
ref_parse AS (SELECT exchange_id FROM streams WHERE side = 'reference' AND chunking = 'parse' AND error IS NULL),
ref_calls AS (SELECT exchange_id, list(index ORDER BY index) AS idx FROM calls WHERE side = 'reference' GROUP BY exchange_id),
side_calls AS (
    SELECT exchange_id, side, chunking,
           list(index ORDER BY index) AS idx,
           list(struct_pack(i := index, a := arguments) ORDER BY index) FILTER (WHERE NOT arguments_json_ok) AS bad_json,
           list(struct_pack(i := index, n := name, a := arguments) ORDER BY index)
               FILTER (WHERE arguments_json_ok AND NOT coalesce(matches_whole, false)) AS mismatched,
           list(struct_pack(i := index, n := name) ORDER BY index) FILTER (WHERE names_sent > 1) AS repeated,
           list(struct_pack(i := index, id := id) ORDER BY index) FILTER (WHERE id_fault) AS bad_ids,
           list(struct_pack(n := name, a := arguments) ORDER BY index) AS all_calls
    FROM calls WHERE side IN ('old', 'new')
    GROUP BY exchange_id, side, chunking
),
rows AS (
    SELECT s.exchange_id, s.side, s.chunking, coalesce(s.n_deltas, 0) AS n_deltas, s.error IS NOT NULL AS raised, s.error,
           s.finish_reason, s.calls_whole, s.content, coalesce(s.content_leak, false) AS content_leak,
           [i FOR i IN coalesce(rc.idx, []) IF NOT list_contains(coalesce(sc.idx, []), i)] AS missing,
           sc.bad_json, sc.mismatched, sc.repeated, sc.bad_ids, sc.all_calls,
           s.client_error, coalesce(s.name_repeats, 0) AS name_repeats, coalesce(s.id_faults, 0) AS id_faults,
           coalesce(s.finish_fault, false) AS finish_fault, coalesce(s.differs_from_reference, false) AS differs_from_reference,
           s.differs_from_own_parse
    FROM streams s
    JOIN ref_parse USING (exchange_id)
    LEFT JOIN ref_calls rc USING (exchange_id)
    LEFT JOIN side_calls sc USING (exchange_id, side, chunking)
    WHERE s.side IN ('old', 'new') AND NOT starts_with(coalesce(s.error, ''), 'chunking:')
),
stream_checks(check_name) AS (
    VALUES ('replay-error'), ('client-error'), ('dropped-call'), ('non-json-join'), ('argument-mismatch'), ('content-leak'),
           ('name-repeat'), ('call-id'), ('finish-reason'), ('streaming-fault'), ('semantic-diff')
),
stream_judged AS (
    SELECT r.exchange_id, r.side, k.check_name, r.chunking, r.n_deltas, NULL::VARCHAR[] AS items,
           CASE k.check_name
               WHEN 'replay-error' THEN true
               WHEN 'client-error' THEN NOT r.raised AND r.chunking <> 'parse'
               WHEN 'name-repeat' THEN NOT r.raised AND r.chunking <> 'parse'
               WHEN 'call-id' THEN NOT r.raised AND r.chunking <> 'parse'
               WHEN 'streaming-fault' THEN NOT r.raised AND r.chunking <> 'parse' AND r.differs_from_own_parse IS NOT NULL
               WHEN 'semantic-diff' THEN NOT r.raised AND r.chunking = 'parse'
               ELSE NOT r.raised END AS applies,
           CASE k.check_name
               WHEN 'replay-error' THEN r.raised
               WHEN 'client-error' THEN r.client_error IS NOT NULL
               WHEN 'dropped-call' THEN len(r.missing) > 0
               WHEN 'non-json-join' THEN len(coalesce(r.bad_json, [])) > 0
               WHEN 'argument-mismatch' THEN len(coalesce(r.mismatched, [])) > 0
               WHEN 'content-leak' THEN r.content_leak
               WHEN 'name-repeat' THEN r.name_repeats > 0
               WHEN 'call-id' THEN r.id_faults > 0
               WHEN 'finish-reason' THEN r.finish_fault
               WHEN 'streaming-fault' THEN r.differs_from_own_parse
               ELSE r.differs_from_reference END AS wrong,
           CASE k.check_name
               WHEN 'replay-error' THEN r.error
               WHEN 'client-error' THEN r.client_error
               WHEN 'dropped-call' THEN r.missing::VARCHAR || ' ' || coalesce(r.finish_reason, '')
               WHEN 'non-json-join' THEN r.bad_json::VARCHAR
               WHEN 'argument-mismatch' THEN r.mismatched::VARCHAR
               WHEN 'content-leak' THEN r.content
               WHEN 'name-repeat' THEN r.repeated::VARCHAR
               WHEN 'call-id' THEN r.bad_ids::VARCHAR
               WHEN 'finish-reason' THEN coalesce(r.finish_reason, '') || ' ' || coalesce(r.all_calls::VARCHAR, '[]')
               ELSE coalesce(r.content, '') || ' ' || coalesce(r.all_calls::VARCHAR, '[]') END AS outcome
    FROM rows r CROSS JOIN stream_checks k
),
judged AS (SELECT * FROM render_judged UNION ALL SELECT * FROM stream_judged),
unfaithful AS (SELECT exchange_id FROM fidelity_exchanges WHERE NOT faithful)
SELECT
    o.exchange_id,
    o.check_name AS "check",
    o.chunking,
    o.n_deltas AS old_deltas,
    n.n_deltas AS new_deltas,
    o.wrong AS old_wrong,
    n.wrong AS new_wrong,
    o.outcome AS old_outcome,
    n.outcome AS new_outcome,
    o.items AS old_items,
    n.items AS new_items,
    CASE WHEN NOT o.wrong AND NOT n.wrong THEN 'same-ok'
         WHEN o.wrong AND NOT n.wrong THEN 'fixed'
         WHEN NOT o.wrong AND n.wrong THEN 'broken'
         WHEN o.outcome IS NOT DISTINCT FROM n.outcome THEN 'still-wrong'
         ELSE 'changed-wrong' END AS verdict,
    (o.chunking <> 'render' AND o.exchange_id IN (SELECT exchange_id FROM unfaithful)) AS unreliable
FROM judged o
JOIN judged n ON n.exchange_id = o.exchange_id AND n.check_name = o.check_name AND n.chunking = o.chunking
WHERE o.side = 'old' AND n.side = 'new' AND o.applies AND n.applies
