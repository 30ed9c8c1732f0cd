-- render_not_judged (view): exchanges the render checks could not judge, with the reason
-- One row per (exchange, render check) whose reference side failed to prepare, serialize or render
-- (there is nothing to judge old and new against): exchange_id, check (null-leak,
-- prompt-divergence, render-failure), reason (the reference's renders.error).
SELECT r.exchange_id, k.check_name AS "check", r.error AS reason
FROM renders r
CROSS JOIN (VALUES ('null-leak'), ('prompt-divergence'), ('render-failure')) AS k(check_name)
WHERE r.side = 'reference' AND r.error IS NOT NULL
