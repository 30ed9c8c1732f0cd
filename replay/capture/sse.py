"""SSE transcripts and response bodies of the three APIs: Chat Completions, Anthropic Messages, Responses.

**Transcript** (format ``sse``): the bytes a client read from a streaming response, as the SDKs'
fixtures and proxies keep them: ``event:`` / ``data:`` lines, a blank line ending each event
(WHATWG HTML "server-sent events": several ``data:`` lines of one event are joined with ``\\n``;
``id:`` / ``retry:`` are ignored; a line starting with ``:`` is a comment). The API is told by the
payloads: ``chat.completion.chunk`` / ``choices`` -> ``chat.completions``; ``message_*`` /
``content_block_*`` -> ``messages``; ``response.*`` -> ``responses``.

One file may hold several streams one after the other: an exchange ends at ``data: [DONE]``
(Chat Completions), ``message_stop`` (Messages), or ``response.completed`` / ``.incomplete`` /
``.failed`` (Responses); a ``[DONE]`` after one of the latter two belongs to the exchange before.
A stream cut short at the end of the file is still an exchange with what it holds. An event
whose stream id (the chunk ``id``, the Messages or Responses id) differs from the stream's first
makes the exchange an ``interleaved-streams`` error naming its line: two streams written into one
file at once cannot be told apart by order alone.

**Pairing a request with a transcript.** Two ways, documented in the README:

1. inside the transcript, an SSE comment line ``: request {JSON}`` before a stream's events gives
   that stream's request (SSE clients ignore comments, so the file stays a valid stream);
2. a sidecar file ``<stem>.request.json`` beside ``<stem>.sse`` (or ``.sse.zst``/``.txt``) holds the
   request of the file's first stream that has no ``: request`` comment. Folder discovery never
   reads a ``*.request.json`` as a capture of its own.

A stream without a request is still an exchange: its ``request_json`` is ``{}``, its model comes
from the payloads, and ``capture_lacks`` says ``request``. Every transcript lacks the raw
completion (``raw_completion``): the served side is checked, nothing is re-streamed.

**Record** (accounting): one exchange of a transcript is one unit, at the line of its first event
(or of its ``: request`` comment). A payload that is not JSON makes its exchange an error
(``bad-event``) naming that line; the events after it up to the exchange's end are part of that
error. A file with no event at all is one ``empty-transcript`` error.

**Body** (format ``body``): a file holding one non-streaming response body as a JSON document
(pretty-printed or not, at most :data:`BODY_MAX_BYTES`), with its request in a sidecar as above.
One record per file, at line 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson

from replay import exactjson
from replay.assemble import payload_route
from replay.capture.detect import sidecar_request_path
from replay.capture.files import LongLine, open_lines
from replay.capture.jsonlines import read_whole
from replay.capture.records import Unit, exchange, failed

__all__ = [
    "BODY_MAX_BYTES",
    "SseEvent",
    "api_of",
    "body_record",
    "events_from_lines",
    "read_body",
    "read_transcript",
    "records_from_events",
]

#: Largest response-body file read whole (bytes, decompressed).
BODY_MAX_BYTES = 64 << 20

_TERMINAL = {
    "messages": {"message_stop"},
    "responses": {"response.completed", "response.incomplete", "response.failed"},
}


@dataclass
class SseEvent:
    """One dispatched SSE event: ``line`` / ``offset`` of its first field line, ``event`` (the
    ``event:`` field or None), ``data`` (the ``data:`` lines joined with ``\\n``), or ``comment``
    (the text after ``:`` of a comment line; then ``data`` is None). ``too_long``: the length in
    bytes of a line over ``--max-line-bytes`` (:class:`replay.capture.files.LongLine`) this event
    held, not read. ``not_utf8``: why a line of this event is not UTF-8 (``line N: invalid UTF-8 at
    byte B: ...``), the first such line; its text was decoded with replacement."""

    line: int
    offset: int
    event: str | None = None
    data: str | None = None
    comment: str | None = None
    too_long: int | None = None
    not_utf8: str | None = None


def events_from_lines(lines: Iterable[tuple[int, int, bytes]]) -> Iterator[SseEvent]:
    """SSE events from ``(line_no, offset, raw)`` lines (as :func:`replay.capture.files.open_lines`
    yields them). Comments come out as events of their own, in place. Bytes that are not UTF-8 are
    decoded with replacement and the event says so (``not_utf8``; the JSON check would pass on
    U+FFFD, so :func:`records_from_events` makes it the exchange's ``not-utf8`` error, as a JSON
    line's). Never raises."""
    cur: SseEvent | None = None
    data: list[str] = []
    for line_no, offset, raw in lines:
        if isinstance(raw, LongLine):  # a line over the limit: its event is an error, not parsed
            if cur is None:
                cur = SseEvent(line_no, offset)
            cur.too_long = cur.too_long or raw.length
            data.append("")
            continue
        bad = None
        try:
            text = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as exc:
            bad = f"line {line_no}: invalid UTF-8 at byte {exc.start}: {exc.reason}"
            text = raw.decode("utf-8", "replace").rstrip("\r")
        if text.startswith("\ufeff"):
            text = text[1:]
        if not text.strip():
            if cur is not None and (data or cur.event is not None):
                cur.data = "\n".join(data) if data else None
                yield cur
            cur, data = None, []
            continue
        if text.startswith(":"):
            yield SseEvent(line_no, offset, comment=text[1:].strip(), not_utf8=bad)
            continue
        name, _, value = text.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if cur is None:
            cur = SseEvent(line_no, offset)
        cur.not_utf8 = cur.not_utf8 or bad
        if name == "data":
            data.append(value)
        elif name == "event":
            cur.event = value.strip()
    if cur is not None and (data or cur.event is not None):
        cur.data = "\n".join(data) if data else None
        yield cur


def api_of(payload: dict) -> str | None:
    """The route a stream payload belongs to, or None when it does not tell
    (:func:`replay.assemble.payload_route`)."""
    return payload_route(payload)


def _model_of(route: str, payloads: list[dict]) -> str | None:
    for p in payloads:
        if route == "chat.completions" and isinstance(p.get("model"), str):
            return p["model"]
        if route == "messages" and p.get("type") == "message_start" and isinstance(p.get("message"), dict):
            m = p["message"].get("model")
            return m if isinstance(m, str) else None
        if route == "responses" and isinstance(p.get("response"), dict):
            m = p["response"].get("model")
            if isinstance(m, str):
                return m
    return None


def _id_of(route: str, payloads: list[dict]) -> str | None:
    for p in payloads:
        if route == "chat.completions" and isinstance(p.get("id"), str):
            return p["id"]
        if route == "messages" and p.get("type") == "message_start" and isinstance(p.get("message"), dict):
            i = p["message"].get("id")
            return i if isinstance(i, str) else None
        if route == "responses" and isinstance(p.get("response"), dict) and isinstance(p["response"].get("id"), str):
            return p["response"]["id"]
    return None


@dataclass
class _Pending:
    line: int
    offset: int
    request: Any = None
    request_line: int | None = None
    payloads: list = field(default_factory=list)
    route: str | None = None
    error: tuple[int, int, str, str] | None = None  # line, offset, reason, detail
    done: bool = False
    stream_id: str | None = None  # the chunk `id` (Chat Completions) / message or response id


def _record(p: _Pending, fallback_request: Any) -> dict | tuple[str, str]:
    """The v1-form record of one stream, or ``(reason, detail)``."""
    if p.error is not None:
        return p.error[2], p.error[3]
    objs = [x for x in p.payloads if isinstance(x, dict)]
    route = p.route or "chat.completions"
    request = p.request if p.request is not None else fallback_request
    lacks = ["raw_completion"]
    if request is None:
        request, lacks = {}, ["request", "raw_completion"]
    rec: dict[str, Any] = {"route": route, "request": request, "stream": p.payloads, "capture_lacks": lacks}
    model = _model_of(route, objs)
    if "model" not in request and model is not None:
        rec["model"] = model
    rid = _id_of(route, objs)
    if rid is not None:
        rec["id"] = rid
    return rec


def _stream_id(payload: dict) -> str | None:
    """The id naming the stream a payload belongs to: a Chat Completions chunk's ``id``, the
    message id of an Anthropic ``message_start``, the response id of a Responses event; else None."""
    if payload.get("object") == "chat.completion.chunk" and isinstance(payload.get("id"), str):
        return payload["id"] or None  # Azure's first chunk (prompt filter results) has id ""
    for key in ("message", "response"):
        inner = payload.get(key)
        if isinstance(inner, dict) and isinstance(inner.get("id"), str):
            return inner["id"] or None
    return None


def records_from_events(
    events: Iterable[SseEvent], sidecar: Callable[[], Any] | None = None
) -> Iterator[tuple[int, int, dict | tuple[str, str]]]:
    """Group SSE events into streams: yields ``(line, offset, record or (reason, detail))`` per
    exchange (rules: module docstring). ``sidecar``: called once, for the first stream without a
    ``: request`` comment; returns the request dict, or raises ``ValueError`` (its message becomes a
    ``bad-sidecar`` error of that exchange)."""
    cur: _Pending | None = None
    sidecar_used = False

    def finish(p: _Pending):
        nonlocal sidecar_used
        fallback = None
        if p.request is None and sidecar is not None and not sidecar_used:
            sidecar_used = True
            try:
                fallback = sidecar()
            except ValueError as exc:
                return p.line, p.offset, ("bad-sidecar", str(exc))
        return p.line, p.offset, _record(p, fallback)

    for ev in events:
        if ev.comment is not None:
            if ev.comment.startswith("request"):
                body = ev.comment[len("request"):].strip()
                if cur is not None:  # a request without a stream is an exchange too
                    yield finish(cur)
                    cur = None
                if ev.not_utf8 is not None:
                    cur = _Pending(ev.line, ev.offset, error=(ev.line, ev.offset, "not-utf8", f"': request' comment: {ev.not_utf8}"))
                    continue
                try:
                    req = exactjson.loads(body)
                except orjson.JSONDecodeError as exc:
                    req = None
                    cur = _Pending(ev.line, ev.offset, error=(ev.line, ev.offset, "bad-request", f"': request' comment is not JSON: {exc}"))
                    continue
                if not isinstance(req, dict):
                    cur = _Pending(ev.line, ev.offset, error=(ev.line, ev.offset, "request-not-object", "': request' comment is not a JSON object"))
                    continue
                cur = _Pending(ev.line, ev.offset, request=req, request_line=ev.line)
            continue
        if ev.too_long is not None:
            if cur is None:
                cur = _Pending(ev.line, ev.offset)
            if cur.error is None:
                cur.error = (ev.line, ev.offset, "line-too-long",
                             f"line {ev.line}: an event line of {ev.too_long} bytes is longer than --max-line-bytes; read past, not parsed")
            continue
        if ev.not_utf8 is not None:
            if cur is None:
                cur = _Pending(ev.line, ev.offset)
            if cur.error is None:
                cur.error = (ev.line, ev.offset, "not-utf8", ev.not_utf8)
            continue
        if ev.data is None:
            continue
        data = ev.data.strip()
        if data == "[DONE]":
            if cur is not None and (cur.payloads or cur.error):
                cur.payloads.append("[DONE]")
                yield finish(cur)
                cur = None
            continue
        if cur is None:
            cur = _Pending(ev.line, ev.offset)
        try:
            payload = exactjson.loads(data)
        except orjson.JSONDecodeError as exc:
            if cur.error is None:
                cur.error = (ev.line, ev.offset, "bad-event", f"line {ev.line}: data is not JSON: {exc}")
            continue
        if not isinstance(payload, dict):
            if cur.error is None:
                cur.error = (ev.line, ev.offset, "bad-event", f"line {ev.line}: data is a JSON {type(payload).__name__}, not an object")
            continue
        api = api_of(payload)
        if cur.route is None and api is not None and payload.get("type") != "error":
            cur.route = api
        sid = _stream_id(payload)
        if sid is not None:
            if cur.stream_id is None:
                cur.stream_id = sid
            elif sid != cur.stream_id and cur.error is None:
                cur.error = (ev.line, ev.offset, "interleaved-streams",
                             f"line {ev.line}: an event of stream {sid!r} inside stream {cur.stream_id!r} "
                             f"(two streams interleaved, or one without its end)")
        cur.payloads.append(payload)
        if cur.route in _TERMINAL and payload.get("type") in _TERMINAL[cur.route]:
            yield finish(cur)
            cur = None
    if cur is not None and (cur.payloads or cur.error or cur.request is not None):
        yield finish(cur)


def _load_sidecar(path: Path, on_read: Callable[[int], None] | None) -> Callable[[], Any] | None:
    side = sidecar_request_path(path)
    if side == path or not side.is_file():
        return None

    def load() -> Any:
        data = side.read_bytes()
        if on_read:
            on_read(len(data))
        try:
            req = exactjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"{side.name} is not JSON: {exc}") from None
        if not isinstance(req, dict):
            raise ValueError(f"{side.name} is not a JSON object")
        return req

    return load


def read_transcript(path: Path, source: str, on_read: Callable[[int], None] | None = None) -> Iterator[Unit]:
    """The units of an SSE transcript file (plain or compressed): one per stream (module docstring).
    Stream faults of the compressed file propagate (:class:`replay.capture.files.StreamFault`)."""
    side = _load_sidecar(path, on_read)
    any_event = False
    for line, offset, rec in records_from_events(events_from_lines(open_lines(path, on_read=on_read)), side):
        any_event = True
        if isinstance(rec, tuple):
            yield failed(line, offset, rec[0], rec[1])
        else:
            yield exchange(line, offset, rec)
    if not any_event:
        yield failed(1, 0, "empty-transcript", "no SSE event in the file")


def body_record(body: Any, request: Any = None) -> dict:
    """The v1-form record of a non-streaming response ``body`` (dict) with its ``request`` (or
    None). Route: ``object`` ``chat.completion`` -> ``chat.completions``, ``response`` ->
    ``responses``, ``type`` ``message`` -> ``messages``. Raises ``ValueError`` when the body is none
    of these."""
    if not isinstance(body, dict):
        raise ValueError(f"body is a JSON {type(body).__name__}, not an object")
    if body.get("object") == "chat.completion" or "choices" in body:
        route = "chat.completions"
    elif body.get("object") == "response":
        route = "responses"
    elif body.get("type") == "message":
        route = "messages"
    else:
        raise ValueError("not a chat.completion, message or response body")
    lacks = ["stream", "raw_completion"]
    if request is None:
        request, lacks = {}, ["request", *lacks]
    rec: dict[str, Any] = {"route": route, "request": request, "response": body, "capture_lacks": lacks}
    if "model" not in request and isinstance(body.get("model"), str):
        rec["model"] = body["model"]
    if isinstance(body.get("id"), str):
        rec["id"] = body["id"]
    return rec


def read_body(path: Path, source: str, on_read: Callable[[int], None] | None = None) -> Iterator[Unit]:
    """The one unit of a response-body file (module docstring). Errors: ``too-large``,
    ``not-utf8``/``bad-json`` (as ``bad-json``), ``bad-body``, ``bad-sidecar``; a decompression fault
    becomes ``corrupt-stream``."""
    data = read_whole(path, BODY_MAX_BYTES, f"a response body file is read whole: more than {BODY_MAX_BYTES} bytes", on_read)
    if isinstance(data, Unit):
        yield data
        return
    try:
        body = exactjson.loads(data[3:] if data.startswith(b"\xef\xbb\xbf") else data)
    except orjson.JSONDecodeError as exc:
        yield failed(1, 0, "bad-json", str(exc), data[:200])
        return
    side = _load_sidecar(path, on_read)
    try:
        request = side() if side else None
    except ValueError as exc:
        yield failed(1, 0, "bad-sidecar", str(exc), data[:200])
        return
    try:
        yield exchange(1, 0, body_record(body, request), data[:200])
    except ValueError as exc:
        yield failed(1, 0, "bad-body", str(exc), data[:200])
