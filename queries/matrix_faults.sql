-- matrix_faults: each (check, exchange) fault of a matrix: the first side (in release order) where it appears and the side where it goes away
-- One row per (check, exchange) that some side gets wrong (view side_states), the sides and the
-- baseline as in the query `matrix` (DuckDB variables `matrix_sides`, `matrix_baseline`; unset:
-- ['old', 'new']):
--   appears      the first side, in order, that gets it wrong
--   goes_away    the first side after the last one that gets it wrong where the check is judged
--                and right; null when the last side judged still gets it wrong
--   wrong_sides  every side that gets it wrong, in order
--   returns      true when some side between the first and the last wrong one judges it right
--                (the fault went away and came back)
--   baseline     the baseline's state: wrong, right, or not-judged
--   family       the parser family of the exchange's model (the reference's parser name)
-- with the smallest failing chunking and the outcome on the side where it appears.
WITH
sides AS (
    SELECT l[i] AS side, i AS side_ord
    FROM (SELECT coalesce(getvariable('matrix_sides')::VARCHAR[], ['old', 'new']) AS l) v,
         range(1, len(l) + 1) AS r(i)
),
baseline AS (SELECT coalesce(getvariable('matrix_baseline')::VARCHAR, (SELECT side FROM sides WHERE side_ord = 1)) AS side),
st AS (SELECT s.*, o.side_ord FROM side_states s JOIN sides o USING (side)),
spans AS (
    SELECT exchange_id, "check",
           min(side_ord) FILTER (WHERE wrong) AS first_ord,
           max(side_ord) FILTER (WHERE wrong) AS last_ord,
           list(side ORDER BY side_ord) FILTER (WHERE wrong) AS wrong_sides
    FROM st
    GROUP BY exchange_id, "check"
    HAVING bool_or(wrong)
),
fam AS (
    SELECT exchange_id, first(parser) AS family FROM streams WHERE side = 'reference' AND chunking = 'parse' GROUP BY exchange_id
)
SELECT
    sp."check",
    sp.exchange_id,
    e.model,
    f.family,
    a.side AS appears,
    (SELECT g.side FROM st g WHERE g.exchange_id = sp.exchange_id AND g."check" = sp."check" AND g.side_ord > sp.last_ord AND NOT g.wrong
     ORDER BY g.side_ord LIMIT 1) AS goes_away,
    sp.wrong_sides,
    EXISTS (SELECT 1 FROM st g WHERE g.exchange_id = sp.exchange_id AND g."check" = sp."check"
            AND g.side_ord > sp.first_ord AND g.side_ord < sp.last_ord AND NOT g.wrong) AS returns,
    coalesce((SELECT CASE WHEN g.wrong THEN 'wrong' ELSE 'right' END FROM st g
              WHERE g.exchange_id = sp.exchange_id AND g."check" = sp."check" AND g.side = (SELECT side FROM baseline)), 'not-judged') AS baseline,
    a.smallest_failing_chunking,
    a.smallest_failing_deltas,
    a.outcome
FROM spans sp
JOIN st a ON a.exchange_id = sp.exchange_id AND a."check" = sp."check" AND a.side_ord = sp.first_ord
JOIN checks k ON k.name = sp."check"
LEFT JOIN exchanges e ON e.exchange_id = sp.exchange_id
LEFT JOIN fam f ON f.exchange_id = sp.exchange_id
ORDER BY k.ord, a.side_ord, sp.exchange_id
