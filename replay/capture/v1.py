"""Capture format v1: one exchange per JSON line -> one ``exchanges`` row and its ``tools`` rows.

A line is a JSON object (UTF-8, RFC 8259)::

    {"id": "...", "ts": "2025-01-01T00:00:00Z", "route": "chat.completions",
     "model": "...", "request": {...},                  # the body exactly as the client sent it
     "response": {...}                                  # a non-streaming response body, or
     "stream": [{...}, "{...}", "[DONE]"],              # the SSE `data:` payloads in order
     "server": {"prompt": "...", "prompt_token_ids": [...], "output_text": "...",
                "output_token_ids": [...], "steps": ["...", ...]}}   # optional

``route`` is ``chat.completions`` (OpenAI Chat Completions), ``messages`` (Anthropic Messages) or
``responses`` (OpenAI Responses). Each ``stream`` payload is a JSON object, a string holding one
(a leading ``data:`` is tolerated), or ``"[DONE]"``. Keys not listed are ignored (so headers, API
keys and other metadata a capture may carry never reach the tables).

Rules:

- ``exchange_id``: ``id`` when it is a string or a number (written as text), else
  ``"<source_file>:<line_no>"``. Duplicated ids are kept: each line is its own row.
- ``ts``: a UTC timestamp from ISO 8601 text or epoch seconds/milliseconds (:func:`timestamp`);
  anything else is ``bad-field``.
- ``model``: ``model``, else the request's ``model``. ``stream``: the request's ``stream`` when a
  bool, False when absent (the APIs' default), null otherwise.
- ``request_json``: the request re-serialized with orjson (key order kept, no spaces; the tool
  list's text reused from the tool-list cache, :func:`request_bytes`). An integer beyond 64 bits
  (which orjson alone reads as a float) is written back digit for digit (:mod:`replay.exactjson`).
- ``served_*``: from ``stream`` when present, else from ``response``; assembled per route by
  :func:`assemble_chat_stream`, :func:`assemble_messages_stream`, :func:`assemble_responses_stream`
  and :func:`served_from_response`. ``served_chunks``: number of payloads of ``stream`` other
  than ``"[DONE]"`` (null without ``stream``).

Every fault raises :class:`CaptureError` with one of :data:`REASONS`.

One concern at over 600 lines: the v1 line format, from a line's bytes to its rows (fields, streams
assembled, the server's logged text, the errors a line can have), which every other capture
format is normalised into; kept whole so the format's rules read in one place.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import orjson

from replay import exactjson
from replay.assemble import ClientCall, assemble_chat, assemble_messages, assemble_responses, id_faults, payload_route
from replay.capture.served import check_served
from replay.tools import describe_tool

__all__ = [
    "REASONS",
    "ROUTES",
    "CaptureError",
    "assemble_chat_stream",
    "assemble_messages_stream",
    "assemble_responses_stream",
    "decode_line",
    "json_text",
    "parse_line",
    "parse_record",
    "record_row",
    "request_bytes",
    "served_from_response",
    "ToolList",
]

#: Routes of capture format v1.
ROUTES = ("chat.completions", "messages", "responses")

#: Every ``ingest_errors.reason`` a v1 line can give (see :func:`parse_line`). Ingest
#: (:mod:`replay.capture.ingest`) adds ``truncated-stream``, ``corrupt-stream`` (stream faults),
#: ``unreadable-file`` (OSError while reading), ``line-too-long`` (a line over ``--max-line-bytes``,
#: read past without being held), ``internal-error`` (an unexpected exception in the
#: line parser: a bug, recorded rather than stopping the run) and ``bad-field`` for a row whose
#: values the table schema rejects.
REASONS = (
    "not-utf8",  # the line is not valid UTF-8 (strict decoding)
    "bad-json",  # not one JSON value (syntax error, NaN, trailing data)
    "not-object",  # valid JSON but not an object
    "missing-request",  # no `request` key (or null)
    "request-not-object",  # `request` is not an object
    "tools-not-list",  # `request.tools` is present, not null and not an array
    "tool-not-object",  # an entry of `request.tools` is not an object
    "too-deep",  # the line nests deeper than orjson reads (1,024), or `request`/a tool deeper than it writes (254)
    "bad-field",  # another field of the wrong type or value (route, ts, model, response, stream, server.*)
)

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_BOM = b"\xef\xbb\xbf"


class CaptureError(ValueError):
    """A capture line that cannot become an exchange.

    ``reason``: short kind, one of :data:`REASONS` (goes to ``ingest_errors.reason``);
    ``detail``: human-readable explanation (goes to ``ingest_errors.detail``).
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# --------------------------------------------------------------------------- small helpers


def _dumps(value: Any, where: str) -> bytes:
    """``exactjson.dumps(value)``; raises ``too-deep`` past orjson's nesting limit (254 levels)."""
    try:
        return exactjson.dumps(value)
    except TypeError as exc:
        if "recursion" in str(exc).lower():
            raise CaptureError("too-deep", f"{where} is nested deeper than 254 levels and cannot be stored as JSON text") from None
        raise CaptureError("bad-field", f"{where} cannot be stored as JSON text: {exc}") from None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def json_text(value: Any) -> str | None:
    """Tool-call arguments as JSON text (str): strings kept as given, other values serialized
    with orjson, None kept; None also for a value orjson cannot write (nested past 254 levels).
    Shared by the v1 parser and the capture readers (OTel) that meet arguments as objects."""
    if value is None or isinstance(value, str):
        return value
    try:
        return exactjson.dumps(value).decode()
    except TypeError:
        return None


def _number_text(value: Any) -> str | None:
    """A string as is; a number (not a bool) as text (integral floats without ``.0``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return None


def _call(index: int, id_: Any, name: Any, arguments: Any) -> dict:
    return {"index": index, "id": _str_or_none(id_), "name": _str_or_none(name), "arguments": json_text(arguments)}


def _index(value: Any, default: int | None) -> int | None:
    """``value`` when it is an int (not a bool) in ``[0, 2**31-1]``, else ``default``."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _INT32_MAX
    return value if ok else default


def _int_list(value: Any, where: str) -> list[int] | None:
    if value is None:
        return None
    # type(v) is int excludes bools; set(map(type, ...)) and min/max run at C speed
    if not (
        type(value) is list
        and set(map(type, value)) <= {int}
        and (not value or (_INT32_MIN <= min(value) and max(value) <= _INT32_MAX))
    ):
        raise CaptureError("bad-field", f"{where} must be a list of 32-bit integers")
    return value


def _opt_str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise CaptureError("bad-field", f"{where} must be a string or null, got {type(value).__name__}")


#: Epoch values at or above this many seconds are read as milliseconds (1e11 s is the year 5138).
_EPOCH_MS_FROM = 1e11


def timestamp(value: Any) -> datetime | None:
    """The ``ts`` field as a UTC datetime (the ``exchanges.ts`` timestamp column).

    Accepted: ISO 8601 text (``2025-01-01T00:00:00Z``, an offset, a space for ``T``, fractions;
    no offset means UTC), and epoch seconds or milliseconds as a number or as digits (a value of
    1e11 or more is milliseconds). None stays None. Anything else raises :class:`CaptureError`
    ``bad-field`` naming the field and what it got."""
    if value is None:
        return None
    num: float | None = None
    if isinstance(value, bool):
        raise CaptureError("bad-field", "ts must be ISO 8601 text or epoch seconds/milliseconds, got a boolean")
    if isinstance(value, (int, float)):
        num = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            num = float(text) if text and text.lstrip("-").replace(".", "", 1).isdigit() else None
        except ValueError:
            num = None
        if num is None:
            try:
                dt = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
            except ValueError:
                raise CaptureError(
                    "bad-field", f"ts {value!r:.60} is neither ISO 8601 text nor epoch seconds or milliseconds"
                ) from None
            return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)
    else:
        raise CaptureError("bad-field", f"ts must be ISO 8601 text or epoch seconds/milliseconds, got {type(value).__name__}")
    if num != num or abs(num) == float("inf"):
        raise CaptureError("bad-field", f"ts {value!r:.60} is not a finite epoch time")
    if abs(num) >= _EPOCH_MS_FROM:
        num /= 1000.0
    try:
        return datetime.fromtimestamp(num, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise CaptureError("bad-field", f"ts {value!r:.60} is out of the range of a timestamp") from None


# --------------------------------------------------------------------------- served: response


def served_from_response(route: str, response: dict) -> tuple[str | None, list[dict] | None, str | None]:
    """``(content, tool_calls, finish_reason)`` a client reads from a non-streaming response body.

    ``chat.completions``: ``choices[0].message`` ``content`` and ``tool_calls`` (``index`` = position,
    ``id``, ``function.name``, ``function.arguments``), ``choices[0].finish_reason``.
    ``messages`` (Anthropic): ``text`` blocks joined, each ``tool_use`` block a call (``index`` =
    position among tool_use blocks, ``arguments`` = ``input`` as JSON text), ``stop_reason``.
    ``responses``: ``output_text`` parts of ``message`` items joined, each ``function_call`` item a
    call (``id`` = ``call_id``), finish reason = ``status``.
    Missing parts give None (tool_calls: None when the body has no call list, ``[]`` when empty);
    values of the wrong type are read as missing. Never raises for a dict.
    """
    if route == "chat.completions":
        choices = response.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        msg = choice.get("message")
        msg = msg if isinstance(msg, dict) else {}
        raw_calls = msg.get("tool_calls")
        calls = None
        if isinstance(raw_calls, list):
            calls = []
            for i, tc in enumerate(raw_calls):
                if not isinstance(tc, dict):
                    continue
                fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                calls.append(_call(i, tc.get("id"), fn.get("name"), fn.get("arguments")))
        return _str_or_none(msg.get("content")), calls, _str_or_none(choice.get("finish_reason"))
    if route == "messages":
        blocks = response.get("content")
        texts: list[str] = []
        calls = []
        if isinstance(blocks, list):
            for b in blocks:
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "text" and isinstance(b.get("text"), str):
                    texts.append(b["text"])
                elif b.get("type") == "tool_use":
                    calls.append(_call(len(calls), b.get("id"), b.get("name"), b.get("input")))
        elif isinstance(blocks, str):
            texts.append(blocks)
        return ("".join(texts) if texts else None), calls, _str_or_none(response.get("stop_reason"))
    # responses
    texts = []
    calls = []
    output = response.get("output")
    for item in output if isinstance(output, list) else ():
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message" and isinstance(item.get("content"), list):
            for part in item["content"]:
                if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
        elif item.get("type") == "function_call":
            calls.append(_call(len(calls), item.get("call_id"), item.get("name"), item.get("arguments")))
    return ("".join(texts) if texts else None), calls, _str_or_none(response.get("status"))


# --------------------------------------------------------------------------- served: streams


def _calls(res: Any) -> list[dict] | None:
    calls = [_call(c.index, c.id, c.name, c.arguments) for c in res.calls]
    return calls if (calls or res.saw_calls) else None


def assemble_chat_stream(chunks: list[dict]) -> tuple[str | None, list[dict] | None, str | None]:
    """``(content, tool_calls, finish_reason)`` from ``chat.completion.chunk`` payloads, as the
    OpenAI Python SDK accumulates them (:func:`replay.assemble.assemble_chat`: a name or id sent
    twice is concatenated; ``tool_calls`` None when no chunk carried any). Never raises."""
    res = assemble_chat(chunks)
    return res.content, _calls(res), res.finish_reason


def assemble_messages_stream(events: list[dict]) -> tuple[str | None, list[dict] | None, str | None]:
    """``(content, tool_calls, finish_reason)`` from Anthropic Messages stream events, as the
    Anthropic SDK's ``MessageStream`` accumulates them (:func:`replay.assemble.assemble_messages`;
    ``tool_calls`` is ``[]`` when no tool_use block came). Never raises."""
    res = assemble_messages(events)
    return res.content, [_call(c.index, c.id, c.name, c.arguments) for c in res.calls], res.finish_reason


def assemble_responses_stream(events: list[dict]) -> tuple[str | None, list[dict] | None, str | None]:
    """``(content, tool_calls, finish_reason)`` from OpenAI Responses stream events
    (:func:`replay.assemble.assemble_responses`; ``tool_calls`` is ``[]`` when none). Never raises."""
    res = assemble_responses(events)
    return res.content, [_call(c.index, c.id, c.name, c.arguments) for c in res.calls], res.finish_reason


def _check_shape(route: str, payloads: list[dict]) -> None:
    """Raise ``bad-field`` when the stream's payloads are another API's (Anthropic events under
    ``chat.completions``): none is of ``route``'s shape and some are of another's
    (:func:`replay.assemble.payload_route`)."""
    kinds = [payload_route(p) for p in payloads]
    if route in kinds:
        return
    other = next((k for k in kinds if k is not None), None)
    if other is not None:
        raise CaptureError(
            "bad-field",
            f"stream payloads have the shape of {other} events, not of route {route} "
            f"(first payload type {payloads[kinds.index(other)].get('type', payloads[kinds.index(other)].get('object'))!r:.40}): fix the capture's route",
        )


_ASSEMBLERS = {
    "chat.completions": assemble_chat,
    "messages": assemble_messages,
    "responses": assemble_responses,
}


def _stream_payloads(stream: Any) -> list[dict]:
    """The payload objects of ``stream`` without ``[DONE]``; raises ``bad-field``."""
    if not isinstance(stream, list):
        raise CaptureError("bad-field", f"stream must be a list of SSE payloads, got {type(stream).__name__}")
    out: list[dict] = []
    for i, p in enumerate(stream):
        if isinstance(p, str):
            s = p.strip()
            if s.startswith("data:"):
                s = s[5:].strip()
            if s == "[DONE]":
                continue
            try:
                p = exactjson.loads(s)
            except orjson.JSONDecodeError as exc:
                raise CaptureError("bad-field", f"stream[{i}] is a string but not JSON: {exc}") from None
        if not isinstance(p, dict):
            raise CaptureError("bad-field", f"stream[{i}] must be a JSON object, a string holding one, or '[DONE]'")
        out.append(p)
    return out


# --------------------------------------------------------------------------- the line


def decode_line(raw: bytes) -> dict:
    """One JSON-lines record: ``raw`` (bytes of one line, a leading UTF-8 BOM ignored) decoded as
    UTF-8 and parsed as a JSON object. Raises :class:`CaptureError` (``not-utf8``, ``bad-json``,
    ``not-object``, ``too-deep``). Every line-based reader (:mod:`replay.capture.readers`) decodes with this."""
    if raw.startswith(_BOM):
        raw = raw[3:]
    try:  # orjson checks UTF-8 itself: a good line is read in one pass (a bad one is classified below)
        rec = exactjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    else:
        if isinstance(rec, dict):
            return rec
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CaptureError("not-utf8", f"invalid UTF-8 at byte {exc.start}: {exc.reason}") from None
    try:
        rec = exactjson.loads(text)
    except orjson.JSONDecodeError as exc:
        # orjson reads at most 1,024 nested arrays/objects; its message for that has changed
        # between releases ("recursion depth exceeded", "depth limit exceeded")
        if "depth" in str(exc).lower():
            raise CaptureError("too-deep", f"the line nests arrays/objects deeper than 1,024 levels: {exc}") from None
        raise CaptureError("bad-json", _what_it_looks_like(text) + str(exc)) from None
    if not isinstance(rec, dict):
        raise CaptureError("not-object", f"line is a JSON {type(rec).__name__}, not an object")
    return rec


_LOOKS_LIKE = (
    (("<!doctype html", "<html", "<head", "<body", "<title", "<center>", "</", "<hr"), "looks like HTML (an error page from a proxy or load balancer?)"),
    (("<?xml",), "looks like XML"),
    (("data:", "event:"), "looks like a server-sent event (an SSE transcript: see --capture-format sse)"),
    (("http/1", "http/2"), "looks like an HTTP status line"),
)


def _what_it_looks_like(text: str) -> str:
    """A hint prefixed to a ``bad-json`` detail when the line is plainly something else; else ""."""
    head = text.lstrip()[:32].lower()
    for starts, hint in _LOOKS_LIKE:
        if head.startswith(starts):
            return f"not JSON, {hint}: "
    return ""


def parse_line(raw: bytes, source_file: str, line_no: int) -> tuple[dict, list[dict]]:
    """Turn one capture line into an ``exchanges`` row and its ``tools`` rows.

    ``raw``: the line's bytes without the newline (a leading UTF-8 BOM is ignored);
    ``source_file``: the file name written to ``source_file``; ``line_no``: 1-based line number.
    Returns ``(exchange_row, tool_rows)``: dicts keyed by the column names of
    :data:`replay.tables.EXCHANGES` and :data:`replay.tables.TOOLS`, with values of the columns'
    types (every value fits the schema). Field rules: see the module docstring.

    Raises :class:`CaptureError` with reason (one of :data:`REASONS`): ``not-utf8``, ``bad-json``,
    ``not-object``, ``missing-request``, ``request-not-object``, ``tools-not-list``,
    ``tool-not-object``, ``too-deep``, ``bad-field``. A blank line (whitespace only) is not a record: the caller
    skips it; given one, this raises ``bad-json``.
    """
    return parse_record(decode_line(raw), source_file, line_no)


def parse_record(rec: dict, source_file: str, line_no: int, capture_format: str = "v1") -> tuple[dict, list[dict]]:
    """Turn one record in the form of a v1 line (a dict) into an ``exchanges`` row and its ``tools`` rows.

    Every reader of :mod:`replay.capture.readers` brings its format to this form, so that one
    function makes the rows of every format. Besides the v1 keys, a record may carry
    ``capture_lacks`` (list of strings: what its format could not hold, written to the column of
    that name), ``headers`` / ``metadata`` (what the capture held besides the exchange; never
    written to a table) and ``stream_unknown`` (True: the format does not keep whether the request
    streamed, so the row's ``stream`` is null when the request has no ``stream`` key). ``capture_format``: written to the ``capture_format`` column.
    ``line_no``: the record's 1-based line (or entry number: see each reader). Returns and raises
    as :func:`parse_line` (a record that is not a dict raises ``not-object``).
    (:func:`record_row` is the same, in the form ingest keeps: JSON text as bytes, the tool list shared.)
    """
    row, tools = record_row(rec, source_file, line_no, capture_format)
    row["request_json"] = row["request_json"].decode()
    row["tools_json"] = row["tools_json"].decode()
    return row, tools.rows(row["exchange_id"])


class ToolList:
    """One distinct tool list of a capture, described once (:func:`_tool_columns`) and shared by
    every exchange that sends it. ``json``: the list as orjson writes it (bytes; its identity in
    the cache); ``cols``: per declaration, the ``tools`` row columns but ``exchange_id`` and
    ``tool_index`` (:func:`replay.tools.describe_tool` and ``tool_json``). Read-only: never
    modified once made (a scrub that changes a declaration makes a list of its own rows)."""

    __slots__ = ("json", "cols", "gate", "scrubbed")

    def __init__(self, json: bytes, cols: tuple[dict, ...]) -> None:
        self.json = json
        self.cols = cols
        self.gate: tuple[int, ...] | None = None  # the secret-scrub rules its text may need, once known (replay.capture.redact)
        self.scrubbed: tuple[Any, Any] | None = None  # (tools to write, what the scrub counted), once computed (replay.capture.redact)

    def __len__(self) -> int:
        return len(self.cols)

    def rows(self, exchange_id: str) -> list[dict]:
        """Fresh ``tools`` rows (dicts of every column) of exchange ``exchange_id``."""
        return [{"exchange_id": exchange_id, "tool_index": i, **cols} for i, cols in enumerate(self.cols)]


def request_bytes(request: dict, tools_json: bytes | None) -> bytes:
    """``exactjson.dumps(request)``, byte for byte, reusing ``tools_json`` (``orjson.dumps`` of
    ``request["tools"]``, known from the tool-list cache) instead of serializing the tools again:
    the request is dumped with its ``tools`` value as an ``orjson.Fragment`` of that text (same key,
    same place). Raises ``too-deep`` / ``bad-field`` as :func:`parse_record` does for the request."""
    if tools_json is None or "tools" not in request:
        return _dumps(request, "request")
    return _dumps({**request, "tools": orjson.Fragment(tools_json)}, "request")


def record_row(rec: dict, source_file: str, line_no: int, capture_format: str = "v1") -> tuple[dict, ToolList]:
    """:func:`parse_record` in the form ingest writes (:mod:`replay.capture.ingest`): the row's
    ``request_json`` is UTF-8 JSON text as ``bytes`` (orjson's output, not decoded), and the tools
    are the request's :class:`ToolList` (shared by every exchange sending the same list; rows are
    made per batch). Raises as :func:`parse_record`."""
    if not isinstance(rec, dict):
        raise CaptureError("not-object", f"record is a {type(rec).__name__}, not an object")
    request = rec.get("request")
    if request is None:
        raise CaptureError("missing-request", "no 'request' object")
    if not isinstance(request, dict):
        raise CaptureError("request-not-object", f"'request' is a {type(request).__name__}, not an object")

    route = rec.get("route")
    if route not in ROUTES:
        raise CaptureError("bad-field", f"route must be one of {', '.join(ROUTES)}; got {route!r:.60}")

    rid = rec.get("id")
    exchange_id = _number_text(rid) if rid is not None else None
    if exchange_id is None:
        exchange_id = f"{source_file}:{line_no}"

    ts_value = timestamp(rec.get("ts"))

    model = rec.get("model")
    if model is None:
        model = _str_or_none(request.get("model"))
    model = _opt_str(model, "model")

    stream_flag = request.get("stream", False)
    stream_flag = stream_flag if isinstance(stream_flag, bool) else None
    if "stream" not in request and ("request" in (rec.get("capture_lacks") or ()) or rec.get("stream_unknown") is True):
        stream_flag = None  # no request captured, or its format does not keep the flag: unknown, not the API default

    msgs = request.get("messages")
    if isinstance(msgs, list):
        n_messages = len(msgs)
    elif route == "responses" and isinstance(request.get("input"), list):
        n_messages = len(request["input"])
    elif route == "responses" and isinstance(request.get("input"), str):
        n_messages = 1
    else:
        n_messages = None

    tools = request.get("tools")
    if tools is None:
        tools = []
    elif not isinstance(tools, list):
        raise CaptureError("tools-not-list", f"request.tools is a {type(tools).__name__}, not an array")
    tool_list = _tool_columns(tools)

    content = calls = finish = None
    client = None
    n_chunks = None
    payloads = None
    if rec.get("stream") is not None:
        payloads = _stream_payloads(rec["stream"])
        n_chunks = len(payloads)
        _check_shape(route, payloads)
        client = _ASSEMBLERS[route](payloads)
        content, finish = client.content, client.finish_reason
        calls = _calls(client) if route == "chat.completions" else [_call(c.index, c.id, c.name, c.arguments) for c in client.calls]
    elif rec.get("response") is not None:
        response = rec["response"]
        if not isinstance(response, dict):
            raise CaptureError("bad-field", f"response must be an object, got {type(response).__name__}")
        content, calls, finish = served_from_response(route, response)
    if n_chunks is not None and n_chunks > _INT32_MAX:
        raise CaptureError("bad-field", "stream has more than 2**31-1 payloads")

    server = rec.get("server")
    if server is None:
        server = {}
    elif not isinstance(server, dict):
        raise CaptureError("bad-field", f"server must be an object, got {type(server).__name__}")
    steps = server.get("steps")
    if steps is not None and not (isinstance(steps, list) and set(map(type, steps)) <= {str}):  # at C speed
        raise CaptureError("bad-field", "server.steps must be a list of strings")

    request_json = request_bytes(request, tool_list.json if rec_tools_is_list(request) else None)
    row = {
        "exchange_id": exchange_id,
        "source_file": source_file,
        "source_line": line_no,
        "ts": ts_value,
        "route": route,
        "model": model,
        "stream": stream_flag,
        "request_json": request_json,
        "n_messages": n_messages,
        "n_tools": len(tools),
        "served_content": content,
        "served_tool_calls": calls,
        "served_finish_reason": finish,
        "served_chunks": n_chunks,
        "server_prompt": _opt_str(server.get("prompt"), "server.prompt"),
        "server_prompt_token_ids": _int_list(server.get("prompt_token_ids"), "server.prompt_token_ids"),
        "server_output_text": _opt_str(server.get("output_text"), "server.output_text"),
        "server_output_token_ids": _int_list(server.get("output_token_ids"), "server.output_token_ids"),
        "server_steps": steps,
        "capture_format": capture_format,
        "capture_lacks": _lacks(rec.get("capture_lacks")),
        # the text request_json holds for `tools` (the shared list's own bytes), b"null" when it holds none
        "tools_json": tool_list.json if rec_tools_is_list(request) else _NULL_TOOLS,
    }
    row.update(check_served(route, model, payloads, content, calls, finish))
    row["served_client_error"] = client.error if client is not None else None
    if client is not None:
        row["served_id_faults"] = id_faults(client.calls)
    elif calls is not None:  # a response body: each call's one id
        row["served_id_faults"] = id_faults(
            ClientCall(c["index"], c["id"], c["name"], c["arguments"], ids_sent=[c["id"]] if c["id"] else []) for c in calls
        )
    else:
        row["served_id_faults"] = None
    return row, tool_list


#: Tool lists seen, by their JSON text: an agent sends the same tools in every request, so each
#: distinct list is described (and its declarations serialized) once. Bounded: emptied when full.
#: Keyed by a fingerprint of the text (:func:`_fingerprint`), each entry the lists sharing it, told
#: apart by their whole text: a dict keyed by the text itself hashed every request's tools
#: again (a fresh bytes object has no cached hash).
_TOOLS_SEEN: dict[tuple[int, bytes, bytes], list[ToolList]] = {}
_TOOLS_SEEN_MAX = 2048
_FP_BYTES = 256


def _fingerprint(text: bytes) -> tuple[int, bytes, bytes]:
    """The length and the first and last :data:`_FP_BYTES` bytes of ``text``."""
    return len(text), text[:_FP_BYTES], text[-_FP_BYTES:]
_NO_TOOLS = ToolList(b"[]", ())
#: ``tools_json`` of a request without a ``tools`` list (absent or null): JSON null.
_NULL_TOOLS = b"null"


def rec_tools_is_list(request: dict) -> bool:
    """True when ``request["tools"]`` is a list (its JSON text is then the :class:`ToolList`'s)."""
    return isinstance(request.get("tools"), list)


def _tool_columns(tools: list) -> ToolList:
    """The :class:`ToolList` of ``tools`` (a list): for each declaration the ``tools`` row columns
    but ``exchange_id`` and ``tool_index``: :func:`replay.tools.describe_tool` and ``tool_json``.
    Raises ``tool-not-object`` / ``too-deep`` / ``bad-field`` as :func:`parse_record` documents.
    Computed once per distinct list (:data:`_TOOLS_SEEN`); the object returned is shared."""
    if not tools:
        return _NO_TOOLS
    try:
        key = exactjson.dumps(tools)
    except TypeError:
        key = None  # too deep or not JSON: the loop below raises the declaration's own error
    bucket = _TOOLS_SEEN.get(_fingerprint(key)) if key is not None else None
    known = next((t for t in bucket if t.json == key), None) if bucket else None
    if known is None:
        cols_list = []
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise CaptureError("tool-not-object", f"request.tools[{i}] is a {type(tool).__name__}, not an object")
            tool_json = _dumps(tool, f"request.tools[{i}]")
            # fast path: no b"null" anywhere in the JSON text means no null value
            cols = describe_tool(tool, scan_nulls=b"null" in tool_json)
            cols["tool_json"] = tool_json.decode()
            cols_list.append(cols)
        if key is None:  # each declaration serializes but the list is one level too deep: the request is too
            key = _dumps(tools, "request")
        known = ToolList(key, tuple(cols_list))
        if len(_TOOLS_SEEN) >= _TOOLS_SEEN_MAX:
            _TOOLS_SEEN.clear()
        _TOOLS_SEEN.setdefault(_fingerprint(key), []).append(known)
    return known


def _lacks(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise CaptureError("bad-field", "capture_lacks must be a list of strings")
    return value
