-- capture_formats: where the exchanges came from, and what each capture format could not hold
-- One row per capture format (replay/capture/detect.py). A count of exchanges lacking a part:
--   exchanges           exchanges read in this format
--   re_streamable       with a raw completion (server output text): re-streamed through the parsers
--   lacking_request     no request body captured (nothing to render)
--   lacking_exact_request  request rebuilt from logged fields (LiteLLM messages, OTel attributes)
--   lacking_raw_completion  no raw completion: not re-streamed
--   lacking_stream      no chunks: only the final response is checked on the served side
--   lacking_response    no response captured at all
--   lacking_served      a server-side record: what the client received is not in it
--   lacking_tools       no tool declarations logged (an OTel span without tool definitions)
--   lacking_tool_shape  tool declarations converted to the Chat Completions shape (flat GenAI definitions)
--   lacks               every part lacked by at least one exchange, comma-separated
WITH l AS (
    SELECT coalesce(capture_format, 'v1') AS capture_format, server_output_text,
           coalesce(capture_lacks, []) AS lacks
    FROM exchanges
)
SELECT
    capture_format,
    count(*) AS exchanges,
    count(*) FILTER (WHERE server_output_text IS NOT NULL) AS re_streamable,
    count(*) FILTER (WHERE list_contains(lacks, 'request')) AS lacking_request,
    count(*) FILTER (WHERE list_contains(lacks, 'exact_request')) AS lacking_exact_request,
    count(*) FILTER (WHERE list_contains(lacks, 'raw_completion')) AS lacking_raw_completion,
    count(*) FILTER (WHERE list_contains(lacks, 'stream')) AS lacking_stream,
    count(*) FILTER (WHERE list_contains(lacks, 'response')) AS lacking_response,
    count(*) FILTER (WHERE list_contains(lacks, 'served')) AS lacking_served,
    count(*) FILTER (WHERE list_contains(lacks, 'tools')) AS lacking_tools,
    count(*) FILTER (WHERE list_contains(lacks, 'tool_shape')) AS lacking_tool_shape,
    coalesce(array_to_string(list_sort(list_distinct(flatten(list(lacks)))), ', '), '') AS lacks
FROM l
GROUP BY capture_format
ORDER BY CASE capture_format WHEN 'v1' THEN 0 ELSE 1 END, capture_format
