-- render_failures: why sides could not render, the top reasons per side with a count and one exchange each
-- One row per (side, reason), at most 5 reasons per side (old, new, reference), most frequent first:
--   reason       the renders.error text (a template's own raise_exception is "rejected by the
--                template: ..."; a server preparer's HTTP 400 "rejected by the <server> preparer: ...")
--   exchanges    exchanges of that side failing with it
--   example      one of them (the smallest exchange_id)
--   of_side      exchanges that side failed on, all reasons
WITH
fails AS (SELECT side, exchange_id, error AS reason FROM renders WHERE error IS NOT NULL AND side IN ('old', 'new', 'reference')),
counted AS (
    SELECT side, reason, count(*) AS exchanges, min(exchange_id) AS example,
           row_number() OVER (PARTITION BY side ORDER BY count(*) DESC, reason) AS rank
    FROM fails GROUP BY side, reason
),
totals AS (SELECT side, count(*) AS of_side FROM fails GROUP BY side)
SELECT c.side, c.reason, c.exchanges, c.example, t.of_side
FROM counted c JOIN totals t USING (side)
WHERE c.rank <= 5
ORDER BY CASE c.side WHEN 'old' THEN 0 WHEN 'new' THEN 1 ELSE 2 END, c.rank
