"""The Arrow schema of every table a run writes: the one contract between stages and SQL.

A run is a folder (``runs/<name>/``) of Parquet files, one per table below, plus ``run.json``
and ``report.md``. Every stage writes record batches with exactly these schemas, and every file in
``queries/`` reads them through DuckDB views of the same names (see :mod:`replay.sql`).

Units: lengths are in characters (Unicode code points) unless a column name says ``tokens`` or
``bytes``; indices are 0-based; ``side`` is one of ``served``, ``old``, ``new``, ``reference``.
"""

from __future__ import annotations

import pyarrow as pa

#: One tool call as a client ends up with it (OpenAI Chat Completions form), JSON text arguments.
CALL = pa.struct(
    [
        pa.field("index", pa.int32()),
        pa.field("id", pa.string()),
        pa.field("name", pa.string()),
        pa.field("arguments", pa.string()),
    ]
)

#: A null found in a tool declaration: which tool of the request, and the JSON path inside it
#: (``$.function.strict``, ``$.function.parameters.properties.path.default``).
NULL_AT = pa.struct([pa.field("tool_index", pa.int32()), pa.field("path", pa.string())])

#: ``exchanges``: one row per captured request/response (a line of a capture file).
EXCHANGES = pa.schema(
    [
        pa.field("exchange_id", pa.string(), nullable=False),  # the capture's `id`, else "<file>:<line>"
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("source_line", pa.int64(), nullable=False),  # 1-based line in the decompressed file
        pa.field("ts", pa.timestamp("us", tz="UTC")),  # from ISO 8601 or epoch seconds/ms (capture.v1.timestamp)
        pa.field("route", pa.string()),  # chat.completions | messages | responses
        pa.field("model", pa.string()),
        pa.field("stream", pa.bool_()),  # the request asked for a stream
        pa.field("request_json", pa.string(), nullable=False),  # request body, JSON text
        pa.field("n_messages", pa.int32()),
        pa.field("n_tools", pa.int32()),
        # what the client received, assembled from `response` or from `stream` as the OpenAI SDK does
        pa.field("served_content", pa.string()),
        pa.field("served_tool_calls", pa.list_(CALL)),
        pa.field("served_finish_reason", pa.string()),
        pa.field("served_chunks", pa.int32()),  # number of SSE payloads in `stream`
        # what the server logged, when it did (`server` object of capture format v1)
        pa.field("server_prompt", pa.string()),
        pa.field("server_prompt_token_ids", pa.list_(pa.int32())),
        pa.field("server_output_text", pa.string()),  # raw completion with special tokens
        pa.field("server_output_token_ids", pa.list_(pa.int32())),
        pa.field("server_steps", pa.list_(pa.string())),  # raw text of each streaming step
        # where the row came from (replay/capture/detect.py FORMATS) and what that format could not hold
        pa.field("capture_format", pa.string()),  # v1 | sse | body | openai-batch | har | serverlog | litellm | otel
        pa.field("capture_lacks", pa.list_(pa.string())),  # request, exact_request, prompt, raw_completion, stream, response, served
        # served-side checks from the captured stream/response alone (replay/capture/served.py)
        pa.field("served_non_json_calls", pa.int32()),  # calls whose joined arguments are not a JSON object
        pa.field("served_name_repeats", pa.int32()),  # a call name sent again for one index / block / item
        pa.field("served_index_faults", pa.int32()),  # call indices that skip or go back; deltas for no open call
        pa.field("served_markup", pa.string()),  # the first call marker of the family left in the content
        pa.field("served_stop_with_calls", pa.bool_()),  # finish_reason stop (end_turn) while calls were sent
        pa.field("served_id_faults", pa.int32()),  # calls whose id is missing, sent twice (the SDK concatenates) or another call's
        pa.field("served_client_error", pa.string()),  # what the client SDK raised assembling the stream (replay/assemble.py); null: none
        # `request.tools` as JSON text ("null" when absent or null), the value request_json holds: the stream stage reads it
        # instead of decoding the whole request (each distinct list once per process); null: not known (the request's own)
        pa.field("tools_json", pa.string()),
    ]
)

#: ``tools``: one row per tool declaration of a request, as the client sent it.
TOOLS = pa.schema(
    [
        pa.field("exchange_id", pa.string(), nullable=False),
        pa.field("tool_index", pa.int32(), nullable=False),  # position in the request's `tools`
        pa.field("type", pa.string()),
        pa.field("name", pa.string()),
        pa.field("has_description", pa.bool_(), nullable=False),
        pa.field("has_parameters", pa.bool_(), nullable=False),
        pa.field("has_strict", pa.bool_(), nullable=False),  # the key is present (its value may be null)
        pa.field("strict", pa.bool_()),  # the value of `strict`; null when absent or null
        pa.field("client_null_paths", pa.list_(pa.string())),  # JSON paths of every null the client wrote
        pa.field("tool_json", pa.string(), nullable=False),  # the declaration as sent, JSON text
    ]
)

#: ``ingest_errors``: one row per capture line (or byte range) that did not become an exchange.
INGEST_ERRORS = pa.schema(
    [
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("source_line", pa.int64()),  # 1-based; null when the fault has no line (a truncated frame)
        pa.field("byte_offset", pa.int64()),  # offset of the line in the decompressed stream, bytes
        pa.field("reason", pa.string(), nullable=False),  # short kind: bad-json, not-object, missing-request, ...
        pa.field("detail", pa.string()),  # the exception text
        pa.field("excerpt", pa.string()),  # at most 120 characters of the line, decoded with replacement
    ]
)

#: ``renders``: one row per (exchange, side): the prompt that side renders for the request.
RENDERS = pa.schema(
    [
        pa.field("exchange_id", pa.string(), nullable=False),
        pa.field("side", pa.string(), nullable=False),  # old | new | reference | served
        pa.field("serializer", pa.string()),
        pa.field("renderer", pa.string()),
        pa.field("n_tools", pa.int32()),
        pa.field("prompt_sha256", pa.string()),  # hex digest of the UTF-8 prompt; null when it failed
        pa.field("prompt_chars", pa.int64()),
        pa.field("prompt_tokens", pa.int64()),  # null without --tokenizer
        pa.field("leaked_nulls", pa.list_(NULL_AT)),  # nulls in the serialized tools the client never wrote
        pa.field("schemas_with_leaked_null", pa.int32()),  # tools of this request with >= 1 leaked null
        pa.field("error", pa.string()),  # why this side could not serialize or render; null when it did
        # token ids compared with the reference's (--reference-encoder with token ids, same tokenizer):
        pa.field("prompt_ids_sha256", pa.string()),  # SHA-256 of the ids as little-endian int32; null: not compared by ids
        pa.field("tokens_differing", pa.int64()),  # tokens in the span where the ids differ from the reference's (replay.stages.render.tokens_differing); 0: equal
        pa.field("preparer", pa.string()),  # the side's request preparer (replay.prepare): vllm, sglang, trtllm, as-sent, plugin:...
        # the leaked nulls reach the model: the prompt rendered without the leaked keys differs
        # (replay.render.exchange); null when there is no leak or the side failed
        pa.field("leak_in_prompt", pa.bool_()),
    ]
)

#: ``streams``: one row per (exchange, side, chunking): a replay of one tool parser.
#: chunking ``parse`` is the side's whole-text parse (the non-streaming path); the ``reference``
#: side has only that row.
STREAMS = pa.schema(
    [
        pa.field("exchange_id", pa.string(), nullable=False),
        pa.field("side", pa.string(), nullable=False),  # old | new | reference
        pa.field("parser", pa.string()),
        pa.field("chunking", pa.string(), nullable=False),  # parse | recorded | whole | char | fixed-N | token | char-raw
        pa.field("n_deltas", pa.int32()),  # deltas fed (0 for `parse`)
        # length of each delta fed, in chars (code points), in order: the completion cut at these
        # offsets gives the deltas (exemplars, `replay show`); null for `parse`, a chunking that
        # could not be cut, and runs written before the column existed
        pa.field("delta_lengths", pa.list_(pa.int32())),
        pa.field("calls_streamed", pa.int32()),  # calls the client assembles (or the parse returns)
        pa.field("calls_whole", pa.int32()),  # calls in the reference whole-text parse
        pa.field("content", pa.string()),  # content the client assembles
        pa.field("reasoning", pa.string()),  # reasoning_content the client assembles
        pa.field("reasoning_open", pa.bool_()),  # the logged prompt opened the reasoning section
        pa.field("finish_reason", pa.string()),  # as the client holds it: the side's own, else tool_calls/stop (length when the capture was truncated)
        pa.field("error", pa.string()),  # parser exception; the row's counts are then null
        # call markup (a marker of the family's parser: <tool_call>, [TOOL_CALLS], ...) in `content`:
        # on old/new rows, a marker occurring more often than in the reference's content (markup the
        # reference does not leave); on the reference row, any marker at all
        pa.field("content_leak", pa.bool_()),
        # facts of the judge (replay/judge.py), computed where the rows are made; the SQL counts them
        pa.field("client_error", pa.string()),  # what the client SDK raised assembling this stream (replay/assemble.py); the row then has no calls
        pa.field("name_repeats", pa.int32()),  # calls whose name came in more than one delta
        pa.field("id_faults", pa.int32()),  # calls with no id, an id sent in more than one delta, or another call's id
        pa.field("finish_fault", pa.bool_()),  # finish_reason other than the row's calls imply (`length` when truncated), or a call closed with invented arguments
        pa.field("differs_from_reference", pa.bool_()),  # content, reasoning or calls differ from the reference whole-text parse
        pa.field("differs_from_own_parse", pa.bool_()),  # streamed rows: differs from this side's own whole-text parse (a streaming fault); null: no own parse
    ]
)

#: ``calls``: one row per call a replay produced (and per call of the reference parse).
CALLS = pa.schema(
    [
        pa.field("exchange_id", pa.string(), nullable=False),
        pa.field("side", pa.string(), nullable=False),
        pa.field("chunking", pa.string(), nullable=False),
        pa.field("index", pa.int32(), nullable=False),  # OpenAI tool_calls[].index
        pa.field("name", pa.string()),  # as the client SDK holds it (names sent twice are concatenated)
        pa.field("arguments", pa.string()),  # argument fragments joined in order
        pa.field("arguments_json_ok", pa.bool_(), nullable=False),  # joined text parses as a JSON object
        pa.field("matches_whole", pa.bool_()),  # same name and same JSON value as the reference call at this index
        pa.field("id", pa.string()),  # the call id the client holds (streamed rows); null for a whole-text parse
        pa.field("names_sent", pa.int32()),  # deltas that carried this call's name (more than 1: name-repeat)
        pa.field("id_fault", pa.bool_()),  # no id, an id sent in more than one delta, or another call's id
        pa.field("matches_own_parse", pa.bool_()),  # same name and JSON value as this side's own whole-text parse at this index
    ]
)

#: ``family_fit``: one row per exchange with a raw completion (or, without one, served content):
#: does the text hold the call markers of the family picked for it (replay/family_fit.py)?
FAMILY_FIT = pa.schema(
    [
        pa.field("exchange_id", pa.string(), nullable=False),
        pa.field("model", pa.string()),
        pa.field("family", pa.string()),  # the family picked (--parser, else the model name); null: none
        pa.field("text_source", pa.string(), nullable=False),  # completion | served_content: the text looked at
        pa.field("marker_families", pa.list_(pa.string())),  # families whose call-start markers occur in it (registry order)
        pa.field("family_markers", pa.bool_()),  # the picked family's own call starts occur; null: it declares none, or none picked
        pa.field("looks_like", pa.string()),  # another family whose markers occur (and the picked family's do not) and whose parse finds more calls; null: fits
        pa.field("looks_like_marker", pa.string()),  # the first of looks_like's call starts found
        pa.field("looks_like_calls", pa.int32()),  # calls looks_like's whole-text parse finds in the text
        pa.field("family_calls", pa.int32()),  # calls the picked family's whole-text parse finds there (when compared)
    ]
)

#: Every table of a run, by the name of its Parquet file (without ``.parquet``) and SQL view.
TABLES: dict[str, pa.Schema] = {
    "exchanges": EXCHANGES,
    "tools": TOOLS,
    "ingest_errors": INGEST_ERRORS,
    "renders": RENDERS,
    "streams": STREAMS,
    "calls": CALLS,
    "family_fit": FAMILY_FIT,
}
