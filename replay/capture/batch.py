"""Batch API files (format ``openai-batch``): an input JSON-lines file and its output, joined by ``custom_id``.

Both APIs' shapes are read:

- OpenAI Batch: input lines ``{"custom_id", "method", "url", "body"}`` (``url`` picks the route:
  ``/v1/chat/completions``, ``/v1/responses``); output lines ``{"id", "custom_id", "response":
  {"status_code", "body"}, "error"}``;
- Anthropic Message Batches: the create call's body ``{"requests": [{"custom_id", "params"}]}``
  (one JSON document: each request one record at its line) or input lines ``{"custom_id",
  "params"}`` (route ``messages``); result lines ``{"custom_id", "result": {"type": "succeeded",
  "message"}}`` (the SDK's ``MessageBatchIndividualResponse``).

Checked on files the SDKs wrote (tests/data/captures/{openai-batch,anthropic-batch}/, by
``tests/writers/batch_writer.py``).

**Pairing files** (:func:`pair_files`), within one folder, in this order:

1. by name: the output whose name is the input's with ``input`` replaced by ``output`` /
   ``results``, or with ``_output`` / ``.output`` / ``-output`` / ``_results`` added before the
   extension;
2. by batch id: OpenAI names a batch's output ``batch_<id>_output.jsonl`` (Anthropic's ids are
   ``msgbatch_<id>``); an input whose name holds the same id is that batch's;
3. by ``custom_id`` and content, for inputs named as the user uploaded them: an output belongs to
   the one input that has every ``custom_id`` of the output's first :data:`PAIR_SAMPLE` lines with
   a request that fits the result: the served model is the requested one (or a dated snapshot of
   it, ``gpt-4o-mini`` -> ``gpt-4o-mini-2024-07-18``), every called tool is declared, the API is
   the same (Chat Completions, Responses, Messages). Two batches that reuse the same custom_ids
   (``request-1``, ...) are told apart so; an output that fits no input, or more than one, or
   whose input another output also fits, or whose sampled lines hold no result (an error file),
   is left unpaired;
4. when a folder holds exactly one unpaired input and one unpaired output, those two.

Input and output are told apart by their first record (``body`` / ``params`` / ``requests`` ->
input; ``response`` / ``error`` / ``result`` -> output). Unpaired files are read alone.

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
from replay.capture.jsonlines import decoded_lines, document_or_lines
from replay.capture.records import Unit, exchange, failed
from replay.capture.storage import is_uri, open_input
from replay.capture.v1 import CaptureError, decode_line

__all__ = ["file_role", "join_record", "pair_files", "read_batch", "role_of"]


#: Output lines read per output file to pair it by custom_id and content.
PAIR_SAMPLE = 64

_BATCH_ID = re.compile(r"(?:msg)?batch_[A-Za-z0-9]{8,}")


def role_of(obj: Any) -> str | None:
    """``"input"``, ``"output"`` or None for one decoded Batch line (an Anthropic create body
    ``{"requests": [{"custom_id", ...}]}`` is an input)."""
    if isinstance(obj, dict) and isinstance(obj.get("requests"), list) and "custom_id" not in obj:
        reqs = obj["requests"]
        return "input" if reqs and isinstance(reqs[0], dict) and "custom_id" in reqs[0] else None
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
    """``{input path: output path}`` for Batch files by role (pairing rules: module docstring; rule
    3 reads the files: one that cannot be read is left to the others)."""
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
    for o in sorted(outputs, key=lambda o: "error" in o.name):  # rule 2: the batch id in both names (the output file before the error file)
        m = _BATCH_ID.search(o.name)
        if o in taken or m is None:
            continue
        same = [i for i in inputs if i not in pairs and i.parent == o.parent and m.group(0) in i.name]
        if len(same) == 1:
            pairs[same[0]] = o
            taken.add(o)
    by_dir: dict[Path, tuple[list[Path], list[Path]]] = {}
    for i in inputs:
        if i not in pairs:
            by_dir.setdefault(i.parent, ([], []))[0].append(i)
    for o in outputs:
        if o not in taken:
            by_dir.setdefault(o.parent, ([], []))[1].append(o)
    for ins, outs in by_dir.values():
        if ins and outs and (len(ins), len(outs)) != (1, 1):
            found = _pair_by_content(ins, outs)
            pairs.update(found)
            ins[:] = [i for i in ins if i not in found]
            outs[:] = [o for o in outs if o not in found.values()]
        if len(ins) == 1 and len(outs) == 1:
            pairs[ins[0]] = outs[0]
    return pairs


def _records(path: Path) -> Iterator[dict]:
    """The decoded Batch records of ``path`` (an Anthropic create body's requests one by one);
    undecodable lines are passed over (the reader reports them)."""
    for _line, _off, _raw, obj in _input_lines(path, None):
        if isinstance(obj, Unit):
            continue
        if isinstance(obj.get("requests"), list) and "custom_id" not in obj:
            yield from (r for r in obj["requests"] if isinstance(r, dict))
        else:
            yield obj


def file_role(path: Path) -> str | None:
    """:func:`role_of` the first record of the Batch file ``path`` that decodes (None when none
    does, or the file cannot be read)."""
    try:
        for rec in _records(path):
            return role_of(rec)
    except Exception:  # noqa: BLE001 - the reader reports the fault
        return None
    return None


def _api(kind: str | None) -> str | None:
    return {"chat.completion": "chat.completions", "response": "responses", "message": "messages"}.get(kind or "")


def _input_facts(inp: dict) -> tuple[str | None, set[str] | None, str]:
    """(requested model, declared tool names (None when the request is not an object), route)."""
    req = inp.get("body") if "body" in inp else inp.get("params")
    if not isinstance(req, dict):
        return None, None, _route(inp)
    names: set[str] = set()
    for t in _list(req.get("tools")):
        if isinstance(t, dict):
            fn = t.get("function") if isinstance(t.get("function"), dict) else t
            if isinstance(fn.get("name"), str):
                names.add(fn["name"])
    model = req.get("model") if isinstance(req.get("model"), str) else None
    return model, names, _route(inp)


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _output_facts(out: dict) -> tuple[str | None, set[str], str | None] | None:
    """(served model, called tool names, API) of an output line; None when it has no body."""
    body, _why = _response_of(out)
    if body is None:
        return None
    called: set[str] = set()
    for ch in _list(body.get("choices")):
        msg = ch.get("message") if isinstance(ch, dict) else None
        for c in _list(msg.get("tool_calls")) if isinstance(msg, dict) else ():
            fn = c.get("function") if isinstance(c, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                called.add(fn["name"])
    for block in _list(body.get("content")):
        if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("name"), str):
            called.add(block["name"])
    for item in _list(body.get("output")):
        if isinstance(item, dict) and item.get("type") == "function_call" and isinstance(item.get("name"), str):
            called.add(item["name"])
    kind = body.get("object") if body.get("object") in ("chat.completion", "response") else body.get("type")
    model = body.get("model") if isinstance(body.get("model"), str) else None
    return model, called, _api(kind)


def _fits(inp: tuple[str | None, set[str] | None, str], out: tuple[str | None, set[str], str | None] | None) -> bool:
    """Whether an output line's result can answer an input line's request (rule 3)."""
    if out is None:
        return True
    in_model, declared, route = inp
    out_model, called, api = out
    if api is not None and api != route:
        return False
    if in_model and out_model and not (out_model == in_model or out_model.startswith(in_model + "-")):
        return False
    return not called or (declared is not None and called <= declared)


def _pair_by_content(ins: list[Path], outs: list[Path]) -> dict[Path, Path]:
    """Rule 3 of the pairing (module docstring) over one folder's unpaired files."""
    try:
        samples: dict[Path, dict[str, Any]] = {}
        for o in outs:
            sample: dict[str, Any] = {}
            for rec in _records(o):
                if isinstance(rec.get("custom_id"), str):
                    sample[rec["custom_id"]] = _output_facts(rec)
                if len(sample) >= PAIR_SAMPLE:
                    break
            samples[o] = sample
        wanted = {cid for s in samples.values() for cid in s}
        facts: dict[Path, dict[str, Any]] = {}
        for i in ins:
            facts[i] = {rec["custom_id"]: _input_facts(rec) for rec in _records(i)
                        if isinstance(rec.get("custom_id"), str) and rec["custom_id"] in wanted}
    except Exception:  # noqa: BLE001 - a file that cannot be read is reported by its reader
        return {}
    # an output whose sampled lines have no body (an error file) tells nothing: it does not compete
    fits = {o: [i for i in ins if all(cid in facts[i] and _fits(facts[i][cid], f) for cid, f in s.items())]
            for o, s in samples.items() if any(f is not None for f in s.values())}
    chosen = {o: c[0] for o, c in fits.items() if len(c) == 1}
    counts: dict[Path, int] = {}
    for i in chosen.values():
        counts[i] = counts.get(i, 0) + 1
    return {i: o for o, i in chosen.items() if counts[i] == 1}


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
        field = "body" if "body" in inp else "params"
        request = inp.get(field)
        if not isinstance(request, dict):
            fmt = "openai-batch input" if field == "body" else "anthropic message batch request"
            raise CaptureError("request-not-object", f"{fmt}: field '{field}' must be an object, got {type(request).__name__}")
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
        for line, offset, raw, obj in decoded_lines(reader, source, decode=_decode):
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


def _decode(raw: bytes) -> dict:
    """:func:`replay.capture.v1.decode_line` with the format leading an error's detail."""
    try:
        return decode_line(raw)
    except CaptureError as exc:
        raise CaptureError(exc.reason, f"openai-batch line: {exc.detail}") from None


def _keys(obj: Any) -> str:
    if isinstance(obj, dict):
        return ", ".join(list(obj)[:8]) or "no keys"
    return f"a JSON {type(obj).__name__}"


def _joined(line: int, offset: int, raw: bytes, inp: dict, idx: "_OutputIndex | None") -> Iterator[Unit]:
    """The unit of one input request joined with its output line (taken from ``idx``)."""
    try:
        joined = idx.take(inp["custom_id"]) if idx is not None and isinstance(inp["custom_id"], str) else None
        yield exchange(line, offset, join_record(inp, joined[2] if joined else None), raw)
    except CaptureError as exc:
        yield Unit(line, offset, raw, error=exc)


def _input_lines(path: Path, on_read: Callable[[int], None] | None) -> Iterator[tuple[int, int, bytes, Any]]:
    """``(line, offset, raw, obj or error Unit)`` of an input file: JSON lines, or one document
    spread over several lines (a create body saved pretty-printed), read whole as line 1
    (:func:`replay.capture.jsonlines.document_or_lines`)."""
    return document_or_lines(path, _decode, on_read)


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
        for line, offset, raw, obj in _input_lines(path, on_read):
            if isinstance(obj, Unit):
                yield obj
                continue
            role = role_of(obj)
            if role is None:
                yield failed(line, offset, "bad-field", "not a Batch line: expected custom_id with body/params (input) or "
                             f"response/error/result (output), or requests (a Message Batch create body); found keys: {_keys(obj)}", raw)
                continue
            if role == "input" and "custom_id" not in obj:  # an Anthropic create body: one record per request
                for n, item in enumerate(obj["requests"]):
                    if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str) or "params" not in item:
                        yield failed(line, offset, "bad-field", f"anthropic message batch create body: requests[{n}] must be an object "
                                     f"with custom_id (a string) and params; found {_keys(item)}", raw)
                        continue
                    yield from _joined(line, offset, raw, item, idx)
                continue
            if role == "output":  # an output file read alone
                try:
                    yield exchange(line, offset, join_record(None, obj), raw)
                except CaptureError as exc:
                    yield Unit(line, offset, raw, error=exc)
                continue
            yield from _joined(line, offset, raw, obj, idx)
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
