-- matrix: check by side: the exchanges each side gets wrong, and against the baseline side the exchanges it fixed and broke
-- One row per (check, side), the render and stream checks of the registry (the `checks` view) in
-- row order and the sides in release order. The sides and the baseline are the DuckDB variables
-- `matrix_sides` (a list of side names, in order) and `matrix_baseline`, which `replay matrix`
-- sets; unset (`replay query matrix --run RUN` on an audit) they are ['old', 'new'] and the first
-- side: an audit is the matrix of its two sides. Each side is judged against the reference on its
-- own (view side_states); counts are exchanges:
--   wrong    exchanges the side gets wrong under at least one chunking
--   judged   exchanges the check applies to on that side
--   fixed    exchanges the baseline gets wrong and this side judges right
--   broke    exchanges the baseline judges right and this side gets wrong
--            (fixed and broke count exchanges judged on both; 0 on the baseline itself)
WITH
sides AS (
    SELECT l[i] AS side, i AS side_ord
    FROM (SELECT coalesce(getvariable('matrix_sides')::VARCHAR[], ['old', 'new']) AS l) v,
         range(1, len(l) + 1) AS r(i)
),
base AS (
    SELECT exchange_id, "check", wrong AS base_wrong
    FROM side_states
    WHERE side = coalesce(getvariable('matrix_baseline')::VARCHAR, (SELECT side FROM sides WHERE side_ord = 1))
),
grid AS (
    SELECT k.name AS "check", k.ord, s.side, s.side_ord
    FROM checks k CROSS JOIN sides s
    WHERE k.scope IN ('render', 'stream')
)
SELECT
    g."check",
    g.side,
    g.side_ord::INTEGER AS side_ord,
    count(st.exchange_id) FILTER (WHERE st.wrong) AS wrong,
    count(st.exchange_id) AS judged,
    count(st.exchange_id) FILTER (WHERE b.base_wrong AND NOT st.wrong) AS fixed,
    count(st.exchange_id) FILTER (WHERE NOT b.base_wrong AND st.wrong) AS broke
FROM grid g
LEFT JOIN side_states st ON st."check" = g."check" AND st.side = g.side
LEFT JOIN base b ON b.exchange_id = st.exchange_id AND b."check" = st."check"
GROUP BY g."check", g.ord, g.side, g.side_ord
ORDER BY g.ord, g.side_ord
