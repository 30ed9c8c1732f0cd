-- dropped_calls: calls the whole-text parse finds that a side's streamed, joined result lacks
-- One row per side (old, new) and chunking. The reference is the built-in whole-text parse of the
-- raw completion; chunking `parse` is the side's own whole-text parse (the non-streaming path).
--   replays             (exchange, chunking) replays that ran without a parser error
--   calls_whole         reference calls over those replays
--   calls_dropped       reference calls with no streamed call at the same index
--   replays_dropping    replays missing at least one call
--   stop_with_calls     replays whose finish_reason is `stop` although the reference has calls
--   extra_calls         streamed calls beyond the reference's count
--   replay_errors       replays where the parser raised (counted here, not in the other columns)
-- A count over nothing judged is null, not 0: every column but replay_errors when no replay ran
-- without an error, and calls_dropped, replays_dropping, stop_with_calls when those replays hold no
-- reference call (nothing to drop).
WITH
ref_calls AS (SELECT exchange_id, index FROM calls WHERE side = 'reference'),
replays AS (SELECT * FROM streams WHERE side IN ('old', 'new')),
dropped AS (
    SELECT s.side, s.chunking, s.exchange_id, rc.index
    FROM replays s JOIN ref_calls rc ON rc.exchange_id = s.exchange_id
    ANTI JOIN calls c ON c.exchange_id = s.exchange_id AND c.side = s.side
                     AND c.chunking = s.chunking AND c.index = rc.index
    WHERE s.error IS NULL
)
SELECT
    s.side,
    s.chunking,
    count(*) FILTER (WHERE s.error IS NULL) AS replays,
    CASE WHEN count(*) FILTER (WHERE s.error IS NULL) > 0 THEN coalesce(sum(s.calls_whole) FILTER (WHERE s.error IS NULL), 0) END::BIGINT AS calls_whole,
    CASE WHEN sum(s.calls_whole) FILTER (WHERE s.error IS NULL) > 0 THEN (SELECT count(*) FROM dropped d WHERE d.side = s.side AND d.chunking = s.chunking) END AS calls_dropped,
    CASE WHEN sum(s.calls_whole) FILTER (WHERE s.error IS NULL) > 0 THEN (SELECT count(DISTINCT d.exchange_id) FROM dropped d WHERE d.side = s.side AND d.chunking = s.chunking) END AS replays_dropping,
    CASE WHEN sum(s.calls_whole) FILTER (WHERE s.error IS NULL) > 0 THEN count(*) FILTER (WHERE s.error IS NULL AND s.finish_reason = 'stop' AND s.calls_whole > 0) END AS stop_with_calls,
    CASE WHEN count(*) FILTER (WHERE s.error IS NULL) > 0 THEN coalesce(sum(greatest(s.calls_streamed - s.calls_whole, 0)) FILTER (WHERE s.error IS NULL), 0) END::BIGINT AS extra_calls,
    count(*) FILTER (WHERE s.error IS NOT NULL) AS replay_errors
FROM replays s
GROUP BY s.side, s.chunking
ORDER BY CASE s.side WHEN 'old' THEN 0 ELSE 1 END,
         CASE s.chunking WHEN 'parse' THEN 0 WHEN 'recorded' THEN 1 WHEN 'whole' THEN 2 WHEN 'char' THEN 3 ELSE 4 END,
         length(s.chunking), s.chunking
