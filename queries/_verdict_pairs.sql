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
sides AS NOT MATERIALIZED (SELECT * FROM side_checks WHERE side IN ('old', 'new')),  -- view side_checks: each side's row, its checks as one list
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
