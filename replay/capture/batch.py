"""Batch API files (format ``openai-batch``): an input JSON-lines file and its output, joined by ``custom_id``.

Both APIs' shapes are read:

- OpenAI Batch: input lines ``{"custom_id", "method", "url", "body"}`` (``url`` picks the route:
  ``/v1/chat/completions``, ``/v1/responses``); output lines ``{"id", "custom_id", "response":
  {"status_code", "body"}, "error"}``;
- Anthropic Message Batches: input lines ``{"custom_id", "params"}`` (route ``messages``); result
  lines ``{"custom_id", "result": {"type": "succeeded", "message"}}``.

**Pairing files.** An input file's output is, in the same folder, the output file whose name is the
input's with ``input`` replaced by ``output`` / ``results``, or with ``_output`` / ``.output`` /
``-output`` / ``_results`` added before the extension; failing that, when a folder holds exactly one
unpaired input and one unpaired output, those two (:func:`pair_files`). Input and output are told
apart by their first record (``body`` / ``params`` -> input; ``response`` / ``error`` / ``result`` ->
output).

**Joining without loading the files.** The output side is indexed, one entry per output line:
``custom_id -> (line, byte offset, length)`` (about 150 bytes per line: a 1M-line output needs about
150 MB); the bodies stay on disk (a compressed output is first decompressed as a stream to a
temporary file, deleted afterwards). The input is then read as a stream, and each line's output is
read back by seeking to its offset.

**Records** (accounting): every input line is a record (an exchange joined with its output, or an
exchange without a response when no output line has its ``custom_id``, or an error). An output
line is a record of its own only when it is blank, broken (error at that output line), a repeated
``custom_id`` (error ``duplicate-custom-id``), or matches no input line (an exchange lacking
``request``, at that output line). An output file with no input is read the same way: each line an
exchange lacking ``request``. Batch results are never streamed: every row lacks ``stream`` and
``raw_completion``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

from replay.capture.detect import open_binary
from replay.capture.files import detect_compression, open_lines
from replay.capture.jsonlines import decoded_lines
from replay.capture.records import Unit, exchange, failed
from replay.capture.storage import is_uri, open_input
from replay.capture.v1 import CaptureError, decode_line

__all__ = ["join_record", "pair_files", "read_batch", "role_of"]


def role_of(obj: Any) -> str | None:
    """``"input"``, ``"output"`` or None for one decoded Batch line."""
    if not isinstance(obj, dict) or "custom_id" not in obj:
        return None
    if "body" in obj or "params" in obj:
        return "input"
    if "response" in obj or "error" in obj or "result" in obj:
        return "output"
    return None


def _stem(name: str) -> str:
    name = re.sub(r"\.(zst|zstd|gz)$", "", name, flags=re.I)
    return re.sub(r"\.(jsonl|ndjson|json)$", "", name, flags=re.I)


def pair_files(roles: dict[Path, str]) -> dict[Path, Path]:
    """``{input path: output path}`` for Batch files by role (pairing rules: module docstring)."""
    inputs = [p for p, r in roles.items() if r == "input"]
    outputs = [p for p, r in roles.items() if r == "output"]
    pairs: dict[Path, Path] = {}
    taken: set[Path] = set()
    for i in inputs:
        s = _stem(i.name)
        names = {s.replace("input", "output"), s.replace("input", "results")} if "input" in s else set()
        names |= {s + suf for suf in ("_output", ".output", "-output", "_results", ".results", "-results")}
        for o in outputs:
            if o not in taken and o.parent == i.parent and _stem(o.name) in names:
                pairs[i] = o
                taken.add(o)
                break
    by_dir: dict[Path, tuple[list[Path], list[Path]]] = {}
    for i in inputs:
        if i not in pairs:
            by_dir.setdefault(i.parent, ([], []))[0].append(i)
    for o in outputs:
        if o not in taken:
            by_dir.setdefault(o.parent, ([], []))[1].append(o)
    for ins, outs in by_dir.values():
        if len(ins) == 1 and len(outs) == 1:
            pairs[ins[0]] = outs[0]
    return pairs


def _route(inp: dict) -> str:
    if "params" in inp:
        return "messages"
    url = inp.get("url") if isinstance(inp.get("url"), str) else ""
    if url.rstrip("/").endswith("/responses"):
        return "responses"
    if url.rstrip("/").endswith("/messages"):
        return "messages"
    return "chat.completions"


def _response_of(out: dict) -> tuple[dict | None, str | None]:
    """The response body of one output line and, when there is none, why."""
    if isinstance(out.get("result"), dict):
        res = out["result"]
        if res.get("type") == "succeeded" and isinstance(res.get("message"), dict):
            return res["message"], None
        return None, f"result {res.get('type')}"
    resp = out.get("response")
    if isinstance(resp, dict) and isinstance(resp.get("body"), dict):
        return resp["body"], None
    if out.get("error") is not None:
        return None, "error"
    return None, "no response body"


def join_record(inp: dict | None, out: dict | None) -> dict:
    """The v1-form record of one Batch request ``inp`` (an input line, or None) joined with its
    output line ``out`` (or None). Raises :class:`CaptureError` when ``body`` / ``params`` is not an
    object."""
    lacks = ["stream", "raw_completion"]
    request: Any = {}
    route = "chat.completions"
    if inp is not None:
        request = inp.get("body") if "body" in inp else inp.get("params")
        if not isinstance(request, dict):
            raise CaptureError("request-not-object", "the input line's body/params is not an object")
        route = _route(inp)
    else:
        lacks.insert(0, "request")
    rec: dict[str, Any] = {"route": route, "request": request, "capture_lacks": lacks}
    if out is not None:
        body, why = _response_of(out)
        if body is not None:
            rec["response"] = body
            if inp is None:
                rec["route"] = "messages" if body.get("type") == "message" else "responses" if body.get("object") == "response" else "chat.completions"
                if isinstance(body.get("model"), str):
                    rec["model"] = body["model"]
        else:
            lacks.append("response")
            rec["metadata"] = {"batch_status": why}
    else:
        lacks.append("response")
    cid = (inp or out or {}).get("custom_id")
    if cid is not None:
        rec["id"] = cid
    return rec


class _OutputIndex:
    """custom_id -> (line, offset, length) over a seekable copy of an output file."""

    def __init__(self, path: Path, source: str, on_read: Callable[[int], None] | None) -> None:
        self.source = source
        self.tmp: str | None = None
        with open_input(path) as fh:
            compressed = detect_compression(fh.read(4)) != "plain"
        if compressed or is_uri(path):  # read back by offset: a local copy, not a ranged request per line
            fd, self.tmp = tempfile.mkstemp(prefix="replay-batch-", suffix=".jsonl")
            with os.fdopen(fd, "wb") as dst, open_binary(path, on_read) as src:
                shutil.copyfileobj(src, dst, 1 << 20)
            self.path = Path(self.tmp)
            reader = open_lines(self.path)
        else:
            self.path = path
            reader = open_lines(path, on_read=on_read)
        self.index: dict[str, tuple[int, int, int]] = {}
        self.units: list[Unit] = []  # blank and broken output lines, in order
        for line, offset, raw, obj in decoded_lines(reader, source):
            if isinstance(obj, Unit):
                self.units.append(obj)
                continue
            cid = obj.get("custom_id")
            if not isinstance(cid, str) or role_of(obj) != "output":
                self.units.append(failed(line, offset, "bad-field", "not a Batch output line (custom_id and response/error/result)", raw, source))
            elif cid in self.index:
                self.units.append(failed(line, offset, "duplicate-custom-id", f"custom_id {cid!r} already at line {self.index[cid][0]}", raw, source))
            else:
                self.index[cid] = (line, offset, len(raw))
        self.fh = open(self.path, "rb")

    def take(self, cid: str) -> tuple[int, int, dict] | None:
        at = self.index.pop(cid, None)
        if at is None:
            return None
        line, offset, length = at
        self.fh.seek(offset)
        return line, offset, decode_line(self.fh.read(length))

    def close(self) -> None:
        self.fh.close()
        if self.tmp:
            os.unlink(self.tmp)


def read_batch(
    path: Path, source: str, output: Path | None = None, on_read: Callable[[int], None] | None = None
) -> Iterator[Unit]:
    """Units of a Batch input file joined with its ``output`` file (or of a lone input or output
    file: ``output`` None). Rules: module docstring. Stream faults of the input propagate as
    :class:`replay.capture.files.StreamFault`; a fault reading the output gives one error row."""
    idx: _OutputIndex | None = None
    if output is not None:
        try:
            idx = _OutputIndex(output, str(output), on_read)
        except Exception as exc:  # noqa: BLE001 - the output cannot be read: say so, read the input alone
            yield failed(None, None, "unreadable-file", f"Batch output {output}: {type(exc).__name__}: {exc}", b"", str(output))
    try:
        if idx is not None:
            yield from idx.units
        for line, offset, raw, obj in decoded_lines(open_lines(path, on_read=on_read)):
            if isinstance(obj, Unit):
                yield obj
                continue
            role = role_of(obj)
            if role is None:
                yield failed(line, offset, "bad-field", "not a Batch line (no custom_id with body/params or response/error/result)", raw)
                continue
            try:
                if role == "output":  # an output file read alone
                    yield exchange(line, offset, join_record(None, obj), raw)
                    continue
                joined = idx.take(obj["custom_id"]) if idx is not None and isinstance(obj["custom_id"], str) else None
                yield exchange(line, offset, join_record(obj, joined[2] if joined else None), raw)
            except CaptureError as exc:
                yield Unit(line, offset, raw, error=exc)
        if idx is not None:
            for cid, (line, offset, length) in sorted(idx.index.items(), key=lambda kv: kv[1][0]):
                idx.fh.seek(offset)
                raw = idx.fh.read(length)
                try:
                    yield exchange(line, offset, join_record(None, decode_line(raw)), raw, str(output))
                except CaptureError as exc:
                    yield Unit(line, offset, raw, error=exc, source=str(output))
    finally:
        if idx is not None:
            idx.close()
