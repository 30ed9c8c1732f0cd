-- matrix_exemplars: the exchanges behind each cell of the matrix: per (check, side), every exchange that side gets wrong, with what it got
-- One row per (check, side, exchange) of view side_states where the side is wrong, the sides as in
-- the query `matrix` (DuckDB variable `matrix_sides`; unset: ['old', 'new']): the exchange's model
-- and family, the chunkings it fails under, the smallest of them (fewest deltas) with its deltas,
-- the check's outcome there, and under that chunking the side's calls, content and error beside
-- the reference parse's calls (render checks: the side's render error, no calls). These are the
-- exemplars a cell of report.html opens.
WITH
sides AS (
    SELECT l[i] AS side, i AS side_ord
    FROM (SELECT coalesce(getvariable('matrix_sides')::VARCHAR[], ['old', 'new']) AS l) v,
         range(1, len(l) + 1) AS r(i)
),
wrong AS (
    SELECT s.*, o.side_ord FROM side_states s JOIN sides o USING (side) WHERE s.wrong
),
side_calls AS (
    SELECT c.exchange_id, c.side, c.chunking, list(struct_pack(name := c.name, arguments := c.arguments) ORDER BY c.index) AS calls
    FROM calls c JOIN (SELECT DISTINCT exchange_id, side, smallest_failing_chunking FROM wrong) w
      ON w.exchange_id = c.exchange_id AND w.side = c.side AND w.smallest_failing_chunking = c.chunking
    GROUP BY ALL
),
ref_calls AS (
    SELECT exchange_id, list(struct_pack(name := name, arguments := arguments) ORDER BY index) AS calls
    FROM calls WHERE side = 'reference' GROUP BY exchange_id
),
fam AS (
    SELECT exchange_id, first(parser) AS family FROM streams WHERE side = 'reference' AND chunking = 'parse' GROUP BY exchange_id
)
SELECT
    w."check",
    w.side,
    w.exchange_id,
    e.model,
    f.family,
    w.failing_chunkings,
    w.smallest_failing_chunking,
    w.smallest_failing_deltas,
    w.outcome,
    coalesce(st.error, r.error) AS error,
    st.content,
    sc.calls,
    rc.calls AS reference_calls
FROM wrong w
JOIN checks k ON k.name = w."check"
LEFT JOIN exchanges e ON e.exchange_id = w.exchange_id
LEFT JOIN fam f ON f.exchange_id = w.exchange_id
LEFT JOIN streams st ON st.exchange_id = w.exchange_id AND st.side = w.side AND st.chunking = w.smallest_failing_chunking
LEFT JOIN renders r ON w.smallest_failing_chunking = 'render' AND r.exchange_id = w.exchange_id AND r.side = w.side
LEFT JOIN side_calls sc ON sc.exchange_id = w.exchange_id AND sc.side = w.side AND sc.chunking = w.smallest_failing_chunking
LEFT JOIN ref_calls rc ON rc.exchange_id = w.exchange_id
ORDER BY k.ord, w.side_ord, w.exchange_id
