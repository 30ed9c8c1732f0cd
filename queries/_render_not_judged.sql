-- render_not_judged (view): exchanges the render checks could not judge because the reference failed
-- One row per (exchange, render check: null-leak, prompt-divergence, render-failure) whose
-- reference side failed to prepare, serialize or render (there is nothing to judge old and new
-- against): exchange_id, check, reason (`reference failed to render: ` and the reference's
-- renders.error). Every exchange a check could not judge, for any reason: view not_judged.
SELECT exchange_id, "check", reason
FROM not_judged
WHERE starts_with(reason, 'reference failed to render: ')
