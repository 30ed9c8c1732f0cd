-- extra_prompt_tokens_histogram: the extra_prompt_tokens query binned, for the report.html histogram
-- One row per non-empty bin of the old side's extra prompt tokens per request over the new side's
-- (extra_prompt_tokens' extra_tokens; its extra_chars when the run has no token counts), over the
-- exchanges both sides rendered without error:
--   unit        `tokens` or `chars`
--   bin_start   first value of the bin (inclusive)
--   bin_end     bin_start + step (exclusive)
--   requests    exchanges whose value is in [bin_start, bin_end)
-- step: the smallest of 1, 2, 5 x 10^k that covers min..max in at most 30 bins; bins start at a
-- multiple of it. Computed here so the page holds at most 30 rows, whatever the run's size.
WITH
pairs AS (
    SELECT o.prompt_tokens - n.prompt_tokens AS extra_tokens, o.prompt_chars - n.prompt_chars AS extra_chars
    FROM renders o JOIN renders n USING (exchange_id)
    WHERE o.side = 'old' AND n.side = 'new' AND o.error IS NULL AND n.error IS NULL
),
unit AS (SELECT CASE WHEN count(extra_tokens) > 0 THEN 'tokens' ELSE 'chars' END AS unit FROM pairs),
vals AS (
    SELECT (CASE WHEN u.unit = 'tokens' THEN p.extra_tokens ELSE p.extra_chars END)::BIGINT AS v, u.unit
    FROM pairs p, unit u
),
extent AS (SELECT min(v) AS lo, max(v) AS hi FROM vals WHERE v IS NOT NULL),
steps AS (SELECT (m * 10::BIGINT ** k)::BIGINT AS step FROM (VALUES (1), (2), (5)) AS t(m), range(0, 18) AS r(k)),
chosen AS (
    SELECT min(s.step) AS step FROM steps s, extent e
    WHERE e.lo IS NOT NULL AND floor(e.hi / s.step) - floor(e.lo / s.step) + 1 <= 30
)
SELECT v.unit, (floor(v.v / c.step) * c.step)::BIGINT AS bin_start, (floor(v.v / c.step) * c.step + c.step)::BIGINT AS bin_end,
       count(*) AS requests
FROM vals v, chosen c
WHERE v.v IS NOT NULL AND c.step IS NOT NULL
GROUP BY ALL
ORDER BY bin_start
