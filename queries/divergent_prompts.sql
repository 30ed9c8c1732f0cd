-- divergent_prompts: prompts that differ between sides, and the extra tokens they cost
-- For each comparison (old vs new, old vs reference, new vs reference, served vs reference):
--   prompts_compared   exchanges both sides rendered without error
--   prompts_diverged   of those, prompts whose SHA-256 differs
--   extra_chars_total  sum of (first side's length - second side's), chars
--   extra_tokens_*     per request, (first side's tokens - second side's): mean, p50, p99, total
--                      (null without --tokenizer or a reference encoder's tokenizer)
--   tokens_differing_total  vs reference only: sum over prompts of the tokens in the span where the
--                      first side's token ids differ from the reference's (null when ids are not compared)
-- Two prompts whose token ids were both recorded (prompt_ids_sha256: a reference encoder with
-- token ids, other sides tokenized with its tokenizer) are compared by their ids, else by their text.
-- `served` is the prompt the server logged; it is compared only when the run's renderer is a chat template.
WITH
ok AS (SELECT * FROM renders WHERE error IS NULL AND prompt_sha256 IS NOT NULL),
pairs(a, b, ord) AS (VALUES ('old', 'new', 0), ('old', 'reference', 1), ('new', 'reference', 2), ('served', 'reference', 3))
SELECT
    p.a || ' vs ' || p.b AS comparison,
    count(*) AS prompts_compared,
    count(*) FILTER (WHERE CASE WHEN x.prompt_ids_sha256 IS NOT NULL AND y.prompt_ids_sha256 IS NOT NULL
                                THEN x.prompt_ids_sha256 <> y.prompt_ids_sha256
                                ELSE x.prompt_sha256 <> y.prompt_sha256 END) AS prompts_diverged,
    sum(x.prompt_chars - y.prompt_chars)::BIGINT AS extra_chars_total,
    round(avg(x.prompt_tokens - y.prompt_tokens), 2) AS extra_tokens_mean,
    quantile_disc(x.prompt_tokens - y.prompt_tokens, 0.5) AS extra_tokens_p50,
    quantile_disc(x.prompt_tokens - y.prompt_tokens, 0.99) AS extra_tokens_p99,
    sum(x.prompt_tokens - y.prompt_tokens)::BIGINT AS extra_tokens_total,
    CASE WHEN p.b = 'reference' THEN sum(x.tokens_differing) END::BIGINT AS tokens_differing_total
FROM pairs p
JOIN ok x ON x.side = p.a
JOIN ok y ON y.side = p.b AND y.exchange_id = x.exchange_id
GROUP BY p.a, p.b, p.ord
ORDER BY p.ord
