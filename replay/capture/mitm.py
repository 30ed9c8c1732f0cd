"""mitmproxy's native flow dump (format ``mitmproxy``): what ``mitmdump -w FILE`` (mitmproxy's
``io.FlowWriter``) writes, read without mitmproxy installed.

The file is a sequence of flows, each one ``tnetstring`` (mitmproxy ``mitmproxy/io/tnetstring.py``:
``<length>:<payload><type>``, the type one of ``,`` bytes, ``;`` text, ``#`` integer, ``^`` float,
``!`` boolean, ``~`` null, ``]`` list, ``}`` dictionary) holding the flow's state
(``mitmproxy/http.py`` ``HTTPFlow.get_state``): ``type`` (``http``), ``id``, ``request`` (``method``,
``scheme``, ``host``, ``port``, ``path``, ``headers`` as ``[name, value]`` pairs, ``content`` as the
bytes that crossed the wire, ``timestamp_start``), ``response`` (``status_code``, ``headers``,
``content``) or ``error``. Flows are read one at a time from the stream (plain or compressed).
**Records**: every flow is one, numbered from 1 in file order (``source_line`` is the flow number,
``byte_offset`` its offset).

Mapping: a ``POST`` whose path ends in ``/chat/completions``, ``/messages`` or ``/responses`` is an
exchange (any other flow, and a flow that is not HTTP, is skipped with its method and path as the
reason); the request body (decoded per ``content-encoding``: gzip, deflate, zstd; brotli when the
``brotli`` package is installed) is the request as sent; a response of type ``text/event-stream``
(or whose body starts with an SSE field) is split into its ``data:`` payloads and kept as the
exchange's stream (mitmproxy buffers a body unless ``stream_large_bodies`` is set: the SSE text is
whole), else it is the JSON body. Id: the flow's ``id``; ts: ``request.timestamp_start``; the
request headers travel in ``headers`` (never written to a table). Lacks, always: ``raw_completion``;
``response`` when the flow has none (a connection error).

A file that stops being tnetstring (cut short, or not a dump) is one ``bad-tnetstring`` error at the
flow being read; a request body that is not JSON is ``bad-json`` naming the field.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import IO, Any, Callable, Iterator

import orjson

from replay import exactjson
import zstandard

from replay.capture.detect import open_binary
from replay.capture.gateways import sse_payloads
from replay.capture.har import route_of_url
from replay.capture.jsonlines import mapped_units
from replay.capture.records import Skip, Unit, failed, request_from_body
from replay.capture.v1 import CaptureError

__all__ = ["flow_record", "loads", "read_dump"]


class TnetstringError(ValueError):
    """Bytes that are not a tnetstring (the message says where)."""


def _parse(data: bytes, i: int, limit: int) -> tuple[Any, int]:
    """The value starting at ``data[i]`` and the index after it; it must end before ``limit``."""
    colon = data.find(b":", i, min(i + 12, limit))
    if colon < 0 or not data[i:colon].isdigit():
        raise TnetstringError(f"no length prefix at byte {i}")
    n = int(data[i:colon])
    start, end = colon + 1, colon + 1 + n
    if end >= limit:
        raise TnetstringError(f"a value of {n} bytes runs past the end of its container at byte {i}")
    kind, payload = data[end:end + 1], data[start:end]
    if kind == b",":
        v: Any = payload
    elif kind == b";":
        v = payload.decode("utf-8", errors="surrogateescape")
    elif kind == b"#":
        v = int(payload)
    elif kind == b"^":
        v = float(payload)
    elif kind == b"!":
        v = payload == b"true"
    elif kind == b"~":
        v = None
    elif kind == b"]":
        v, j = [], start
        while j < end:
            item, j = _parse(data, j, end)
            v.append(item)
    elif kind == b"}":
        v, j = {}, start
        while j < end:
            key, j = _parse(data, j, end)
            if j >= end:
                raise TnetstringError(f"a dictionary key without a value at byte {j}")
            val, j = _parse(data, j, end)
            v[key.decode("utf-8", errors="replace") if isinstance(key, bytes) else key] = val
    else:
        raise TnetstringError(f"unknown type {kind!r} at byte {end}")
    return v, end + 1


def loads(data: bytes) -> Any:
    """The value of one whole tnetstring ``data``. Raises :class:`TnetstringError`."""
    try:
        value, end = _parse(data, 0, len(data))
    except ValueError as exc:  # int()/float() of a bad payload
        raise TnetstringError(str(exc)) from None
    if end != len(data):
        raise TnetstringError(f"{len(data) - end} bytes after the value")
    return value


def _next_flow(fh: IO[bytes]) -> bytes | None:
    """The bytes of the next top-level tnetstring of ``fh``, None at the end; raises :class:`TnetstringError`."""
    head = b""
    while True:
        c = fh.read(1)
        if not c:
            if head.strip():
                raise TnetstringError("the file ends inside a length prefix")
            return None
        if c == b":":
            break
        if not c.isdigit() and not (c.isspace() and not head):
            raise TnetstringError(f"not a tnetstring: {head[:20] + c!r} where a length prefix should be")
        if not c.isspace():
            head += c
        if len(head) > 12:
            raise TnetstringError("a length prefix longer than 12 digits")
    n = int(head)
    body = fh.read(n + 1)
    if len(body) < n + 1:
        raise TnetstringError(f"the file ends inside a flow of {n} bytes ({len(body)} read)")
    return head + b":" + body


def _header(headers: Any, name: str) -> str | None:
    for pair in headers or ():
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            k, v = (x.decode("latin-1") if isinstance(x, bytes) else str(x) for x in pair)
            if k.lower() == name:
                return v
    return None


def _body(msg: dict, where: str) -> bytes | None:
    content = msg.get("content")
    if content is None:
        return None
    if isinstance(content, str):
        content = content.encode("utf-8", errors="surrogateescape")
    enc = (_header(msg.get("headers"), "content-encoding") or "").strip().lower()
    try:
        if enc in ("gzip", "x-gzip"):
            return gzip.decompress(content)
        if enc == "deflate":
            try:
                return zlib.decompress(content)
            except zlib.error:
                return zlib.decompress(content, -zlib.MAX_WBITS)
        if enc == "zstd":
            return zstandard.ZstdDecompressor().decompressobj().decompress(content)
        if enc == "br":
            import brotli  # optional: mitmproxy's own dependency

            return brotli.decompress(content)
    except ImportError:
        raise CaptureError("bad-field", f"mitmproxy {where}: content-encoding br needs the brotli package") from None
    except Exception as exc:  # noqa: BLE001 - every codec's fault
        raise CaptureError("bad-field", f"mitmproxy {where}: content-encoding {enc} does not decode: {type(exc).__name__}") from None
    return content


def flow_record(flow: Any) -> list[dict | Skip]:
    """The v1-form record of one decoded flow (mapping: module docstring), or a :class:`Skip`.
    Raises :class:`CaptureError` (``bad-field``, ``bad-json``, ``not-utf8``) naming the field."""
    if not isinstance(flow, dict):
        raise CaptureError("bad-field", f"mitmproxy flow is a {type(flow).__name__}, not a dictionary")
    if flow.get("type") != "http":
        return [Skip(f"mitmproxy: a {str(flow.get('type'))[:20]} flow, not HTTP")]
    req = flow.get("request")
    if not isinstance(req, dict):
        raise CaptureError("bad-field", f"mitmproxy flow has no request dictionary; keys: {', '.join(list(flow)[:8])}")
    method = req.get("method")
    method = method.decode("latin-1") if isinstance(method, bytes) else str(method)
    path = req.get("path")
    path = path.decode("latin-1") if isinstance(path, bytes) else str(path)
    route = route_of_url(path.split("?", 1)[0])
    if route is None or method.upper() != "POST":
        return [Skip(f"mitmproxy: {method[:10]} {path[:60]} is not an LLM API call")]
    request, lacks = request_from_body(_body(req, "request.content"), "mitmproxy request.content")
    lacks.append("raw_completion")
    rec: dict[str, Any] = {"route": route, "request": request, "capture_lacks": lacks}
    resp = flow.get("response")
    body = _body(resp, "response.content") if isinstance(resp, dict) else None
    if body is None or not body.strip():
        lacks.append("response")
    else:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CaptureError("not-utf8", f"mitmproxy response.content is not UTF-8: invalid UTF-8 at byte {exc.start}") from None
        ctype = _header(resp.get("headers"), "content-type") or ""
        if "event-stream" in ctype or text.lstrip().startswith(("data:", "event:")):
            rec["stream"] = sse_payloads(text)
        else:
            try:
                rec["response"] = exactjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise CaptureError("bad-json", f"mitmproxy response.content is not JSON: {exc}") from None
    fid = flow.get("id")
    if isinstance(fid, (str, bytes)):
        rec["id"] = fid.decode() if isinstance(fid, bytes) else fid
    if isinstance(req.get("timestamp_start"), (int, float)):
        rec["ts"] = req["timestamp_start"]
    rec["headers"] = [[x.decode("latin-1") if isinstance(x, bytes) else x for x in pair] for pair in req.get("headers") or () if isinstance(pair, (list, tuple))]
    return [rec]


def read_dump(path: Path, on_read: Callable[[int], None] | None = None) -> Iterator[Unit]:
    """Units of a mitmproxy dump, one per flow (rules: module docstring)."""
    n, offset = 0, 0
    try:
        with open_binary(path, on_read) as fh:
            while True:
                try:
                    data = _next_flow(fh)
                    if data is None:
                        return
                    flow = loads(data)
                except TnetstringError as exc:
                    yield failed(n + 1, offset, "bad-tnetstring", f"mitmproxy dump (tnetstring): flow {n + 1}: {exc}")
                    return
                n += 1
                yield from mapped_units(n, offset, data[:400], flow, flow_record)
                offset += len(data)
    except Exception as exc:  # noqa: BLE001 - decompression faults of every kind
        yield failed(n + 1, offset, "corrupt-stream", f"after flow {n}: {type(exc).__name__}: {exc}")
