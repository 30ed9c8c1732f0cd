"""HAR 1.2 archives (format ``har``): browser and mitmproxy exports; each LLM API entry is an exchange.

The file is read as a stream with ijson (``log.entries.item``, one entry in memory at a time), plain
or compressed. **Records**: every entry is one, numbered from 1 in file order; ``source_line`` of a
row or error is that entry number (a HAR is one JSON document, so there is no line to name) and
``byte_offset`` is null. An entry whose URL path does not end in ``/chat/completions``,
``/messages`` or ``/responses`` (an LLM API call) is ``skipped``. A HAR that stops being JSON stops
there: one ``bad-json`` error at the entry being read.

Mapping (HAR 1.2 spec: ``request.postData.text``, ``response.content.text`` with optional
``encoding: base64``, ``startedDateTime``): the request body is ``postData.text`` (JSON); the
response body, when its ``mimeType`` is ``text/event-stream`` or its text starts with an SSE field,
is one SSE stream kept as one text blob: it is split back into events
(:func:`replay.capture.sse.events_from_lines`) and read as the stream of the exchange; otherwise it
is a JSON response body. The request headers travel in the record's ``headers`` (never written to a
table). Rows lack ``raw_completion``; ``request`` / ``response`` too when the export left a body out
(browsers drop large or binary bodies).
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlparse

import ijson
import orjson

from replay import exactjson
from replay.capture.detect import open_binary
from replay.capture.jsonlines import mapped_units
from replay.capture.records import Skip, Unit, failed, request_from_body
from replay.capture.sse import events_from_lines, records_from_events
from replay.capture.v1 import CaptureError

__all__ = ["entry_record", "read_har", "route_of_url"]

_ROUTES = (("/chat/completions", "chat.completions"), ("/messages", "messages"), ("/responses", "responses"))


def route_of_url(url: Any) -> str | None:
    """The route of an LLM API URL by its path's end, or None for any other URL."""
    if not isinstance(url, str):
        return None
    path = urlparse(url).path.rstrip("/")
    for end, route in _ROUTES:
        if path.endswith(end):
            return route
    return None


def _text(content: Any, where: str) -> str | None:
    """``response.content.text`` as text (base64-decoded when ``encoding`` is ``base64``), or None
    when absent. Raises :class:`CaptureError` ``bad-field`` (not base64) or ``not-utf8`` (decoded
    bytes that are not UTF-8, strict as a v1 line: replacement would turn them into U+FFFD, which
    the JSON check accepts, an exchange with mangled text), ``where`` prefixing the detail."""
    if not isinstance(content, dict) or not isinstance(content.get("text"), str):
        return None
    text = content["text"]
    if content.get("encoding") == "base64":
        try:
            data = base64.b64decode(text)
        except (binascii.Error, ValueError):
            raise CaptureError("bad-field", f"{where}response.content.text is not base64") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CaptureError("not-utf8", f"{where}response.content.text (base64) is not UTF-8: "
                                           f"invalid UTF-8 at byte {exc.start}: {exc.reason}") from None
    return text


def entry_record(entry: Any, number: int | None = None) -> dict | Skip:
    """The v1-form record of one HAR entry, or a :class:`Skip` saying why it is not an LLM API
    call (a page load, an asset, another method: counted by reason; mapping: module docstring). ``number``: the entry's 1-based number in the file, named in a
    ``not-utf8`` detail. Raises :class:`CaptureError`: ``not-object``, ``bad-json`` (a body that
    is not JSON), ``bad-event`` (a streamed body whose events are not JSON), ``bad-field``,
    ``not-utf8`` (a base64 body whose bytes are not UTF-8)."""
    if not isinstance(entry, dict):
        raise CaptureError("not-object", f"entry is a JSON {type(entry).__name__}, not an object")
    req = entry.get("request") if isinstance(entry.get("request"), dict) else {}
    route = route_of_url(req.get("url"))
    if route is None or str(req.get("method", "POST")).upper() != "POST":
        return Skip("har: an entry that is not a POST to an LLM API (a page load, an asset)")
    post = req.get("postData")
    body_text = post.get("text") if isinstance(post, dict) else None
    request, lacks = request_from_body(body_text if isinstance(body_text, str) else None, "request.postData.text")
    lacks.append("raw_completion")
    rec: dict[str, Any] = {"route": route, "request": request, "capture_lacks": lacks}
    resp = entry.get("response") if isinstance(entry.get("response"), dict) else {}
    content = resp.get("content") if isinstance(resp.get("content"), dict) else {}
    text = _text(content, f"entry {number}: " if number is not None else "")
    mime = str(content.get("mimeType") or "")
    if text is None or not text.strip():
        lacks.append("response")
    elif "event-stream" in mime or text.lstrip().startswith(("data:", "event:")):
        lines = ((i + 1, 0, ln.encode("utf-8")) for i, ln in enumerate(text.split("\n")))
        streams = list(records_from_events(events_from_lines(lines)))
        if streams:
            _line, _off, first = streams[0]
            if isinstance(first, tuple):
                raise CaptureError(first[0], f"response.content.text: {first[1]}")
            rec["route"] = first["route"] if first.get("route") else route
            rec["stream"] = first["stream"]
            if "model" not in request and first.get("model"):
                rec["model"] = first["model"]
        else:
            lacks.append("response")
    else:
        try:
            rec["response"] = exactjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise CaptureError("bad-json", f"response.content.text is not JSON: {exc}") from None
        if not isinstance(rec["response"], dict):
            raise CaptureError("bad-field", "response.content.text is not a JSON object")
    if isinstance(entry.get("startedDateTime"), str):
        rec["ts"] = entry["startedDateTime"]
    if isinstance(req.get("headers"), list):
        rec["headers"] = req["headers"]
    return rec


_EVENT_WORDS = {"start_map": "an object", "string": "a string", "number": "a number", "boolean": "a boolean", "null": "null"}


def _entries_kind(path: Path, backend: Any) -> str | None:
    """None when the HAR ``path``'s ``log.entries`` is a list; else what it is, in words (``"an
    object"``, ``"missing"``). Reads the file's events up to that key (a HAR that gave no entry)."""
    with open_binary(path) as fh:
        for prefix, event, _value in backend.parse(fh):
            if prefix == "log.entries":
                return None if event == "start_array" else _EVENT_WORDS.get(event, event)
    return "missing"


def read_har(path: Path, source: str, on_read: Callable[[int], None] | None = None) -> Iterator[Unit]:
    """Units of a HAR file, one per entry (rules: module docstring). ijson's C backend (yajl)
    stops with ``integer overflow`` on an integer beyond 64 bits, which is valid JSON (RFC 8259
    section 6 sets no limit): the file is then read again from its start with ijson's pure-Python
    backend, which reads every integer exactly, and the entries not yet yielded follow."""
    n = 0
    backend: Any = ijson
    while True:
        try:
            with open_binary(path, on_read if backend is ijson else None) as fh:  # bytes counted once
                for i, entry in enumerate(backend.items(fh, "log.entries.item", use_float=True)):
                    if i < n:  # yielded before the C backend stopped
                        continue
                    n += 1
                    raw = exactjson.dumps(entry)[:400] if isinstance(entry, (dict, list)) else b""
                    yield from mapped_units(n, None, raw, entry, lambda e: [entry_record(e, n)])
            if n == 0:  # no entry: an empty list, or no list at all (which is not an empty capture)
                kind = _entries_kind(path, backend)
                if kind is not None:
                    yield failed(1, None, "bad-field", f"HAR log.entries is {kind}, not a list of entries")
            return
        except ijson.JSONError as exc:  # yajl's message draws a caret under the text on more lines
            if backend is ijson and "integer overflow" in str(exc):
                backend = ijson.get_backend("python")
                continue
            first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
            yield failed(n + 1, None, "bad-json", f"HAR is not JSON after entry {n}: {first}")
            return
        except Exception as exc:  # noqa: BLE001 - decompression faults of every kind
            yield failed(n + 1, None, "corrupt-stream", f"after entry {n}: {type(exc).__name__}: {exc}")
            return
