"""A corpus of bad capture input, written on demand into a folder (nothing big is committed).

Each :class:`Case` has a ``name``, a ``build(folder)`` that writes its file(s) there, and what
ingest must make of it: ``reasons`` (the ``ingest_errors`` rows by reason), ``exchanges``,
``lines`` (records read, blank ones included: a line of the line-based formats, a stream of an SSE
transcript, an entry of a HAR), ``blank`` and ``skipped``. The first cases are capture v1 and
file-level faults; :data:`FORMAT_CASES` are the other capture formats' own faults. Every count is derived from how the
builder writes the input (see each builder's comment), never read back from ingest. Used by
``tests/test_bad_inputs.py``; ``python tests/bad_inputs.py OUT`` writes the whole corpus into OUT
(one folder per case) to try it by hand: ``replay audit OUT --out runs/bad``.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import orjson
import zstandard

#: The size of the long line of case ``line-100mb`` (bytes).
LONG_LINE_BYTES = 100 * 1024 * 1024


def good(i: int, **over) -> dict:
    """A valid capture v1 record: one tool, a non-streaming response with one call."""
    rec = {
        "id": f"ok-{i}",
        "ts": "2026-11-30T12:00:00Z",
        "route": "chat.completions",
        "model": "Qwen/Qwen3-8B",
        "request": {
            "model": "Qwen/Qwen3-8B",
            "messages": [{"role": "user", "content": f"question {i}"}],
            "tools": [{"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
        },
        "response": {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
                     "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "read", "arguments": '{"path": "a"}'}}]}}]},
        "server": {"output_text": '<tool_call>\n{"name": "read", "arguments": {"path": "a"}}\n</tool_call>'},
    }
    rec.update(over)
    return rec


def line(rec: dict | bytes) -> bytes:
    if isinstance(rec, bytes):
        return rec
    try:
        return orjson.dumps(rec)
    except TypeError:  # an integer beyond 64 bits
        return json.dumps(rec).encode()


def jl(*recs: dict | bytes, end: bytes = b"\n") -> bytes:
    return b"".join(line(r) + end for r in recs)


def chunk(delta: dict | None = None, finish: str | None = None, index: int = 0) -> dict:
    choices = [] if delta is None else [{"index": index, "delta": delta, "finish_reason": finish}]
    return {"object": "chat.completion.chunk", "choices": choices}


def streamed(i: int, payloads: list) -> dict:
    rec = good(i, stream=payloads)
    del rec["response"]
    rec["request"]["stream"] = True
    return rec


@dataclass
class Case:
    """One kind of bad input and what ingest must make of it (see the module docstring).

    ``lines``: None when the number of records is not a line count (a fault stops reading).
    ``skip``: a reason to skip the case on this machine (None: run it). ``duplicate_ids``: exchanges
    whose id was seen before. ``skipped``: records that are not exchanges (an OTel span without
    ``gen_ai.*``): neither exchange nor error.
    """

    name: str
    build: Callable[[Path], None]
    reasons: dict[str, int] = field(default_factory=dict)
    exchanges: int = 0
    lines: int | None = None
    blank: int = 0
    duplicate_ids: int = 0
    skipped: int = 0
    skip: str | None = None


def _write(name: str, data: bytes) -> Callable[[Path], None]:
    def build(d: Path) -> None:
        (d / name).write_bytes(data)

    return build


# ---------------------------------------------------------------- compressed streams

_THREE = jl(good(1), good(2), good(3))


def _zst_truncated(d: Path) -> None:
    # frame 1: two whole lines; frame 2: one line, cut in half -> 2 exchanges + truncated-stream
    c = zstandard.ZstdCompressor(write_checksum=True)
    f2 = c.compress(jl(good(3)))
    (d / "cut.jsonl.zst").write_bytes(c.compress(jl(good(1), good(2))) + f2[: len(f2) // 2])


def _gz_truncated_lines() -> tuple[bytes, int]:
    """A gzip of 200 lines cut at 60 %, and the number of whole lines its readable part holds."""
    data = jl(*(good(i) for i in range(200)))
    gz = gzip.compress(data)
    cut = gz[: int(len(gz) * 0.6)]
    readable = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(cut)
    return cut, readable.count(b"\n")


def _gz_truncated(d: Path) -> None:
    (d / "cut.jsonl.gz").write_bytes(_gz_truncated_lines()[0])


def _zst_corrupt_middle(d: Path) -> None:
    # three frames; the second frame's block header is overwritten: frame 1's 3 lines are read,
    # then reading stops at the corrupt frame (corrupt-stream)
    c = zstandard.ZstdCompressor(write_checksum=True)
    f2 = bytearray(c.compress(jl(good(10), good(11))))
    f2[6:9] = b"\xff\xff\xff"
    (d / "mid.jsonl.zst").write_bytes(c.compress(_THREE) + bytes(f2) + c.compress(_THREE))


def _gz_bad_crc(d: Path) -> None:
    # the member's CRC-32 is flipped: all 3 lines decode, then the check fails (corrupt-stream)
    gz = bytearray(gzip.compress(_THREE))
    gz[-8] ^= 0xFF
    (d / "crc.jsonl.gz").write_bytes(bytes(gz))


def _gz_trailing_garbage(d: Path) -> None:
    (d / "tail.jsonl.gz").write_bytes(gzip.compress(_THREE) + b"this is not gzip")


def _gz_members(d: Path) -> None:
    (d / "members.jsonl.gz").write_bytes(gzip.compress(jl(good(1))) + gzip.compress(jl(good(2))))


def _zst_skippable_only(d: Path) -> None:
    # a zstd skippable frame (magic 0x184D2A50, 4-byte length, payload) and nothing else
    (d / "skip.jsonl.zst").write_bytes(b"\x50\x2a\x4d\x18" + (8).to_bytes(4, "little") + b"metadata")


# ---------------------------------------------------------------- files and paths


def _binary(d: Path) -> None:
    # a PNG signature then 8 KB of bytes 0x80-0xFF: lines "\x89PNG\r" (not UTF-8), "\x1a" (a
    # control char: not JSON), the rest (no 0x0A in it: one line, not UTF-8)
    (d / "image.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(0x80, 0x100)) * 64)


def _long_line(d: Path) -> None:
    # a good line, a 100 MB line (a JSON string that never ends: it would not parse either), a good line
    with (d / "long.jsonl").open("wb") as f:
        f.write(jl(good(1)))
        f.write(b'{"id": "long", "request": {"messages": [{"role": "user", "content": "')
        block = b"x" * (1 << 20)
        left = LONG_LINE_BYTES - 64
        while left > 0:
            f.write(block[: min(left, len(block))])
            left -= len(block)
        f.write(b"\n")
        f.write(jl(good(2)))


def _dir_named_like_capture(d: Path) -> None:
    # a folder named x.jsonl holding one good capture: walked into, its file read
    (d / "x.jsonl").mkdir()
    (d / "x.jsonl" / "inner.jsonl").write_bytes(jl(good(1)))


def _symlink_loop(d: Path) -> None:
    # a capture name pointing at itself: open() fails (ELOOP) -> unreadable-file
    os.symlink("loop.jsonl", d / "loop.jsonl")


def _dangling_symlink(d: Path) -> None:
    os.symlink("does-not-exist.jsonl", d / "dangling.jsonl")


def _folder_loop(d: Path) -> None:
    # a folder symlink back to its parent: its real folder is walked once, no endless walk; one good file
    (d / "sub").mkdir()
    os.symlink("..", d / "sub" / "up")
    (d / "sub" / "one.jsonl").write_bytes(jl(good(1)))


def _unreadable(d: Path) -> None:
    p = d / "secret.jsonl"
    p.write_bytes(jl(good(1)))
    p.chmod(0)


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


# ---------------------------------------------------------------- the corpus

_HTML = (
    b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n<body>\n"
    b"<center><h1>502 Bad Gateway</h1></center>\n<hr><center>nginx</center>\n</body>\n</html>\n"
)

_DEEP = 100_000

CASES: list[Case] = [
    Case("empty-file", _write("empty.jsonl", b""), lines=0),
    Case("blank-lines-only", _write("blank.jsonl", b"\n  \n\t\n\r\n"), lines=4, blank=4),
    Case("truncated-zst", _zst_truncated, {"truncated-stream": 1}, exchanges=2),
    Case("truncated-gz", _gz_truncated, {"truncated-stream": 1}, exchanges=_gz_truncated_lines()[1]),
    Case("zero-byte-gz", _write("zero.jsonl.gz", b""), lines=0),
    Case("zero-byte-zst", _write("zero.jsonl.zst", b""), lines=0),
    Case("zst-corrupt-frame-in-middle", _zst_corrupt_middle, {"corrupt-stream": 1}, exchanges=3),
    Case("gz-bad-crc", _gz_bad_crc, {"corrupt-stream": 1}, exchanges=3),
    Case("gz-trailing-garbage", _gz_trailing_garbage, {"corrupt-stream": 1}, exchanges=3),
    Case("gz-multi-member", _gz_members, exchanges=2, lines=2),
    Case("zst-skippable-frame-only", _zst_skippable_only, lines=0),
    Case("non-utf8", _write("latin1.jsonl", jl(good(1)) + b'{"id": "caf\xe9", "route": "chat.completions", "request": {}}\n'),
         {"not-utf8": 1}, exchanges=1, lines=2),
    Case("binary-file", _binary, {"not-utf8": 2, "bad-json": 1}, lines=3),
    Case("line-100mb", _long_line, {"line-too-long": 1}, exchanges=2, lines=3),
    Case("valid-json-wrong-shape", _write("shape.jsonl", jl({"hello": "world"}, {"request": None, "route": "messages"})),
         {"missing-request": 2}, lines=2),
    Case("json-array-line", _write("array.jsonl", jl(b"[1, 2, 3]", b"[" + line(good(1)) + b"]")), {"not-object": 2}, lines=2),
    Case("json-scalars", _write("scalars.jsonl", jl(b"null", b"42", b'"text"', b"true")), {"not-object": 4}, lines=4),
    Case("crlf-lines", _write("crlf.jsonl", jl(good(1), good(2), end=b"\r\n")), exchanges=2, lines=2),
    Case("utf8-bom", _write("bom.jsonl", b"\xef\xbb\xbf" + jl(good(1), good(2))), exchanges=2, lines=2),
    Case("bom-only", _write("bom-only.jsonl", b"\xef\xbb\xbf"), {"bad-json": 1}, lines=1),
    Case("nul-bytes", _write("nul.jsonl", jl(line(good(1)).replace(b"question", b"ques\x00tion"), b"\x00\x00\x00", good(2))),
         {"bad-json": 2}, exchanges=1, lines=3),
    Case("token-id-over-int32", _write("int32.jsonl", jl(good(1, server={"output_text": "x", "output_token_ids": [1, 2**31]}))),
         {"bad-field": 1}, lines=1),
    Case("token-id-over-int64", _write("int64.jsonl", b'{"route": "chat.completions", "request": {}, "server": {"prompt_token_ids": [1, 18446744073709551616]}}\n'),
         {"bad-field": 1}, lines=1),
    Case("json-nested-100k-line", _write("deep.jsonl", b"[" * _DEEP + b"]" * _DEEP + b"\n"), {"too-deep": 1}, lines=1),
    Case("json-nested-100k-in-request", _write("deep-req.jsonl",
         b'{"route": "chat.completions", "request": {"messages": ' + b"[" * _DEEP + b"]" * _DEEP + b"}}\n" + jl(good(1))),
         {"too-deep": 1}, exchanges=1, lines=2),
    Case("json-nested-100k-in-tool", _write("deep-tool.jsonl",
         b'{"route": "chat.completions", "request": {"tools": [{"type": "function", "x": ' + b"[" * _DEEP + b"]" * _DEEP + b"}]}}\n"),
         {"too-deep": 1}, lines=1),
    Case("tools-not-list", _write("tools.jsonl", jl(good(1, request={"messages": [], "tools": {"name": "read"}}))), {"tools-not-list": 1}, lines=1),
    Case("tool-not-object", _write("tool.jsonl", jl(good(1, request={"messages": [], "tools": ["read", 3]}))), {"tool-not-object": 1}, lines=1),
    # a request the server would reject is still the request as sent: kept, and the render stage records it
    Case("messages-not-list", _write("msgs.jsonl", jl(good(1, request={"messages": "hi", "tools": []}), good(2, request={"messages": {"role": "user"}}))),
         exchanges=2, lines=2),
    Case("request-not-object", _write("req.jsonl", jl(good(1, request="GET /v1/chat"), good(2, request=[1]))), {"request-not-object": 2}, lines=2),
    Case("route-missing-or-unknown", _write("route.jsonl", jl(good(1, route=None), good(2, route="completions"))), {"bad-field": 2}, lines=2),
    Case("chunk-choices-empty", _write("choices.jsonl", jl(streamed(1, [chunk(), chunk({"content": "hi"}, "stop"), chunk(), "[DONE]"]))), exchanges=1, lines=1),
    Case("stream-without-done", _write("nodone.jsonl", jl(streamed(1, [chunk({"content": "hi"}), chunk({"content": " there"})]))), exchanges=1, lines=1),
    Case("stream-out-of-order", _write("order.jsonl", jl(streamed(1, [
        chunk({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "ls", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "read", "arguments": '{"path"'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "a"}'}}]}, "tool_calls"),
        chunk({"content": "after the finish"}),
        chunk({"tool_calls": [{"index": 7, "function": {"arguments": "orphan"}}]}, index=1),
        chunk({"tool_calls": [{"index": "zero", "function": {"name": "weird"}}]}),
        "[DONE]", chunk({"content": "after DONE"}),
    ]))), exchanges=1, lines=1),
    Case("stream-payload-not-json", _write("payload.jsonl", jl(streamed(1, ["data: {bad", "[DONE]"]), streamed(2, [7]))), {"bad-field": 2}, lines=2),
    Case("html-error-page", _write("error.jsonl", _HTML), {"bad-json": 7}, lines=7),
    Case("duplicated-ids", _write("dups.jsonl", jl(good(1), good(1), good(1, id=None), good(2, id="ok-1"))), exchanges=4, lines=4, duplicate_ids=2),
    Case("directory-named-like-capture", _dir_named_like_capture, exchanges=1, lines=1),
    Case("symlink-loop", _symlink_loop, {"unreadable-file": 1}, lines=1),
    Case("dangling-symlink", _dangling_symlink, {"unreadable-file": 1}, lines=1),
    Case("folder-symlink-loop", _folder_loop, exchanges=1, lines=1),
    Case("unreadable-file", _unreadable, {"unreadable-file": 1}, lines=1,
         skip="running as root: chmod 000 does not stop root from reading" if _is_root() else None),
    Case("trailing-data-after-json", _write("trail.jsonl", jl(line(good(1)) + b' {"more": 1}', line(good(2)) + b" xyz")), {"bad-json": 2}, lines=2),
    Case("nan-and-infinity", _write("nan.jsonl", jl(b'{"id": NaN, "route": "chat.completions", "request": {}}', b'{"route": "chat.completions", "request": {"temperature": Infinity}}')),
         {"bad-json": 2}, lines=2),
    Case("lone-surrogate-escape", _write("surrogate.jsonl", jl(line(good(1)).replace(b"question", b"\\ud800question"))), {"bad-json": 1}, lines=1),
    Case("last-line-without-newline", _write("nonl.jsonl", jl(good(1)) + line(good(2))), exchanges=2, lines=2),
    Case("odd-ids", _write("ids.jsonl", jl(good(1, id={"a": 1}), good(2, id=2**70), good(3, id=True), good(4, id=""))), exchanges=4, lines=4),
    Case("duplicate-keys", _write("dupkeys.jsonl", b'{"route": "chat.completions", "request": [], "request": {"messages": []}}\n'), exchanges=1, lines=1),
    Case("server-fields-wrong-type", _write("server.jsonl", jl(good(1, server={"steps": ["a", 1]}), good(2, server="log"), good(3, server={"prompt": 5}))),
         {"bad-field": 3}, lines=3),
    Case("response-wrong-type", _write("resp.jsonl", jl(good(1, response="OK"), good(2, response={"choices": "none"}))), {"bad-field": 1}, exchanges=1, lines=2),
    Case("ts-wrong-type", _write("ts.jsonl", jl(good(1, ts={"sec": 1}), good(2, ts=1.5e9))), {"bad-field": 1}, exchanges=1, lines=2),
]


# ---------------------------------------------------------------- other capture formats (replay/capture/*)


def sse_chunk(content: str | None = None, finish: str | None = None, cid: str = "chatcmpl-1") -> dict:
    delta = {} if content is None else {"content": content}
    return {"id": cid, "object": "chat.completion.chunk", "model": "Qwen/Qwen3-8B",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def sse(*payloads: dict | str, eol: str = "\n") -> bytes:
    """An SSE transcript: one ``data:`` event per payload."""
    return "".join(f"data: {p if isinstance(p, str) else json.dumps(p)}{eol}{eol}" for p in payloads).encode()


def _request_json() -> bytes:
    return orjson.dumps(good(1)["request"])


def _files(**files: bytes) -> Callable[[Path], None]:
    def build(d: Path) -> None:
        for name, data in files.items():
            (d / name.replace("__", ".")).write_bytes(data)

    return build


def har(entries: list) -> bytes:
    return orjson.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": entries}})


def har_entry(text: str, *, encoding: str | None = None, mime: str = "application/json", post: bytes | None = None) -> dict:
    content = {"size": len(text), "mimeType": mime, "text": text}
    if encoding:
        content["encoding"] = encoding
    return {
        "startedDateTime": "2026-11-30T10:00:00.000Z", "time": 1,
        "request": {"method": "POST", "url": "https://gw.example.test/v1/chat/completions", "httpVersion": "HTTP/1.1",
                    "headers": [], "queryString": [], "cookies": [], "headersSize": -1, "bodySize": -1,
                    "postData": {"mimeType": "application/json", "text": (post or _request_json()).decode()}},
        "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "headers": [], "cookies": [],
                     "content": content, "redirectURL": "", "headersSize": -1, "bodySize": -1},
        "cache": {}, "timings": {"send": 1, "wait": 1, "receive": 1},
    }


_BODY = orjson.dumps(good(1)["response"]).decode()


def _batch_in(cid: str) -> bytes:
    return orjson.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": good(1)["request"]})


def _anthropic_events(*events: dict) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


_SPAN_ATTRS = [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
               {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4.1"}},
               {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])}}]


def _sse_long_line(d: Path) -> None:
    # a stream, a stream whose one data line is 40 MiB (over the default 32 MiB limit), a stream
    with (d / "long.sse").open("wb") as f:
        f.write(sse(sse_chunk("a", "stop", cid="a"), "[DONE]"))
        f.write(b'data: {"id": "b", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "')
        for _ in range(40):
            f.write(b"y" * (1 << 20))
        f.write(b'"}}]}\n\ndata: [DONE]\n\n')
        f.write(sse(sse_chunk("c", "stop", cid="c"), "[DONE]"))


def _otel(*spans: dict | str) -> bytes:
    return orjson.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": list(spans)}]}]})


FORMAT_CASES: list[Case] = [
    # SSE transcripts: one record per stream
    Case("sse-without-done", _files(s__sse=sse(sse_chunk("hi"), sse_chunk(" there", "stop"))), exchanges=1, lines=1),
    Case("sse-interleaved-streams", _files(s__sse=sse(sse_chunk("a1", cid="a"), sse_chunk("b1", cid="b"), sse_chunk("a2", "stop", cid="a"),
                                                      sse_chunk("b2", "stop", cid="b"), "[DONE]")), {"interleaved-streams": 1}, lines=1),
    Case("sse-out-of-order-events", _files(s__sse=_anthropic_events(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "message_stop"})), exchanges=1, lines=1),
    Case("sse-data-not-json", _files(s__sse=b"data: {bad\n\ndata: [DONE]\n\n" + sse(sse_chunk("ok", "stop"), "[DONE]")),
         {"bad-event": 1}, exchanges=1, lines=2),
    Case("sse-line-over-limit", _sse_long_line, {"line-too-long": 1}, exchanges=2, lines=3),
    Case("sse-comments-only", _files(s__sse=b": keepalive\n: keepalive\n"), {"empty-transcript": 1}, lines=1),
    Case("sse-done-only", _files(s__sse=b"data: [DONE]\n\n"), {"empty-transcript": 1}, lines=1),
    Case("sse-crlf", _files(s__sse=sse(sse_chunk("hi", "stop"), "[DONE]", eol="\r\n")), exchanges=1, lines=1),
    Case("sse-choices-empty", _files(s__sse=sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": []},
                                                sse_chunk("hi", "stop"), "[DONE]")), exchanges=1, lines=1),
    # an nginx error page where the stream should be: not SSE, so read (and refused) line by line
    Case("sse-html-error-page", _files(s__sse=_HTML, s__request__json=_request_json()), {"bad-json": 7}, lines=7),
    Case("body-html-error-page", _files(a__json=_HTML, a__request__json=_request_json()), {"bad-json": 7}, lines=7),
    Case("sse-truncated-zst", _files(s__sse__zst=zstandard.ZstdCompressor().compress(sse(sse_chunk("hi"), sse_chunk("x", "stop"), "[DONE]"))[:-10]),
         {"truncated-stream": 1}, lines=1),
    # HAR: one record per entry
    Case("har-base64-body", _files(g__har=har([har_entry(__import__("base64").b64encode(_BODY.encode()).decode(), encoding="base64")])),
         exchanges=1, lines=1),
    Case("har-bad-base64", _files(g__har=har([har_entry("@@ not base64 @@", encoding="base64")])), {"bad-field": 1}, lines=1),
    # a base64 body whose bytes are Latin-1, not UTF-8: the entry is an error, the next one an exchange
    Case("har-base64-not-utf8", _files(g__har=har([har_entry(__import__("base64").b64encode(_BODY.replace("null", '"caf\u00e9"', 1).encode("latin-1")).decode(), encoding="base64"),
                                                    har_entry(_BODY)])), {"not-utf8": 1}, exchanges=1, lines=2),
    Case("har-truncated", _files(g__har=har([har_entry(_BODY), har_entry(_BODY)])[:-300]), {"bad-json": 1}, exchanges=1, lines=2),
    Case("har-entries-not-objects", _files(g__har=har([3, "x", har_entry(_BODY)])), {"not-object": 2}, exchanges=1, lines=3),
    Case("har-html-response", _files(g__har=har([har_entry("<html>502 Bad Gateway</html>", mime="text/html")])), {"bad-json": 1}, lines=1),
    Case("har-post-not-json", _files(g__har=har([har_entry(_BODY, post=b"model=x&messages=y")])), {"bad-json": 1}, lines=1),
    Case("har-no-entries", _files(g__har=har([])), lines=0),
    # Batch API
    Case("batch-duplicated-custom-ids", _files(bi__jsonl=_batch_in("r1") + b"\n" + _batch_in("r1") + b"\n"), exchanges=2, lines=2, duplicate_ids=1),
    Case("batch-output-without-input", _files(bo__jsonl=orjson.dumps({"id": "b", "custom_id": "r1", "response": {"status_code": 200, "body": good(1)["response"]}, "error": None}) + b"\n"),
         exchanges=1, lines=1),
    # OpenTelemetry, LiteLLM, server logs
    Case("otel-span-without-gen-ai", _files(o__jsonl=_otel({"traceId": "a", "spanId": "b", "name": "GET /", "attributes": []}) + b"\n"), lines=1, skipped=1),
    Case("otel-spans-not-a-list", _files(o__jsonl=orjson.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": "x"}]}]}) + b"\n"), {"bad-field": 1}, lines=1),
    Case("litellm-messages-not-list", _files(l__jsonl=orjson.dumps({"request_id": "x", "call_type": "acompletion", "model": "m", "messages": '{"a": 1}', "response": "{}"}) + b"\n"),
         {"bad-field": 1}, lines=1),
    Case("serverlog-token-id-over-int32", _files(l__jsonl=orjson.dumps({"request_id": "x", "model": "m", "prompt_token_ids": [1, 2**40], "output_text": "hi"}) + b"\n"),
         {"bad-field": 1}, lines=1),
]

CASES += FORMAT_CASES


def write_corpus(root: Path, cases: list[Case] = CASES) -> dict[str, Path]:
    """Write every case into ``root/<case name>/``; returns ``{name: folder}`` (skipped cases left out)."""
    out: dict[str, Path] = {}
    for case in cases:
        if case.skip:
            continue
        d = root / case.name
        d.mkdir(parents=True)
        case.build(d)
        out[case.name] = d
    return out


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/bad_inputs.py OUT")
    for name, d in write_corpus(Path(sys.argv[1])).items():
        print(d)
