-- extra_prompt_tokens: per exchange, how much longer the old side's prompt is than the new side's
-- One row per exchange that both sides rendered without error (the histogram of report.html):
--   exchange_id
--   extra_tokens   old prompt_tokens - new prompt_tokens (null without --tokenizer or an encoder's ids)
--   extra_chars    old prompt_chars - new prompt_chars
-- The totals, mean and percentiles are in the divergent_prompts query.
SELECT o.exchange_id,
       o.prompt_tokens - n.prompt_tokens AS extra_tokens,
       o.prompt_chars - n.prompt_chars AS extra_chars
FROM renders o JOIN renders n USING (exchange_id)
WHERE o.side = 'old' AND n.side = 'new' AND o.error IS NULL AND n.error IS NULL
ORDER BY o.exchange_id
