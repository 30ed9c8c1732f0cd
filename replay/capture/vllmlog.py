"""vLLM's request log (format ``vllm-log``): the text lines ``vllm serve --enable-log-requests
--enable-log-outputs`` writes, read into one exchange per request id.

The lines are those of ``vllm/entrypoints/logger.py`` (``RequestLogger``), behind vLLM's logging
prefix (``INFO 12-01 10:00:01 [logger.py:43] ``, in later releases after ``(APIServer pid=N) ``):

- ``Received request ID: prompt: '<rendered prompt>', params: SamplingParams(...), prompt_token_ids:
  [...], prompt_embeds shape: None, lora_request: None.`` (v0.10 and before, at INFO); later
  releases log ``Request ID details: prompt: '...', prompt_token_ids: [...], prompt_embeds shape:
  None.`` (at DEBUG: ``VLLM_LOGGING_LEVEL=DEBUG``) and ``Received request ID: params: ...`` (INFO,
  no prompt). The prompt is Python's ``repr`` of the text the chat template rendered (cut at
  ``--max-log-len`` when set);
- ``Generated response ID: output: '...', output_token_ids: [...], finish_reason: ...`` (a whole
  response: ``output`` is the content the server returned, or ``[tool_calls: name(arguments), ...]``,
  not the raw text; ``output_token_ids`` are the raw completion's ids, special tokens included);
- ``Generated response ID (streaming delta): ...`` per streamed delta the tool parser emitted (only
  those: tokens the parser held back are in no line, so the deltas do not join to the completion)
  and ``Generated response ID (streaming complete): output: '<the streamed text>', output_token_ids:
  None, finish_reason: streaming_complete`` (``vllm/entrypoints/openai/serving_chat.py``: the text
  the stream was parsed from, kept when a tool or reasoning parser ran, else the placeholder
  ``<streaming_complete: N tokens>``).

Mapping, through :func:`replay.capture.serverlog.record_from_log` (so ids are decoded with
``--tokenizer`` as a server log's): ``server.prompt`` and ``prompt_token_ids`` from the request
line; the raw completion from the whole response's ``output_token_ids`` (decoded with the
tokenizer: without one, ``raw_completion`` is lacking), or the streaming-complete text; the model
from the engine's start-up line (``served_model_name=...`` / ``model='...'``) when the file holds it.
The exchange is numbered by the line of its request's first line. vLLM does not log the request
body: every exchange lacks ``request`` (nothing rendered; the served prompt is kept for comparison)
and ``served``. Every other line is skipped with its reason counted: a line of the same request
(``joined``), a delta line, or a line that is not the request logger's.

A request line whose prompt or id list does not parse (a line cut short) is an error row
(``bad-field``) naming the field, at its line; so is a JSON line (another format's record, when a
file is forced as ``--capture-format vllm-log``), naming the lines expected and the keys found.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from replay.capture.files import open_lines
from replay.capture.records import Unit, exchange, failed
from replay.capture.v1 import CaptureError

__all__ = ["parse_line", "read_log"]

_RECEIVED = re.compile(r"Received request (\S+): ")
_DETAILS = re.compile(r"Request (\S+) details: ")
_GENERATED = re.compile(r"Generated response (\S+?)(?: \((streaming delta|streaming complete)\))?: output: ")
_MODEL = re.compile(r"served_model_name=([^,\s]+)|model='([^']+)'")
#: The lines of the request logger, by what they start with (after the logging prefix).
SNIFF = re.compile(rb"(Received request \S+: (prompt|params): |Generated response \S+: output: |Request \S+ details: prompt: )")
_PLACEHOLDER = re.compile(r"<streaming_complete: \d+ tokens>")


def _literal(s: str, i: int, what: str) -> tuple[Any, int]:
    """The Python literal (a quoted string, a list of ints, None) at ``s[i:]`` and the index after it;
    raises ``bad-field`` naming ``what``."""
    if s.startswith("None", i):
        return None, i + 4
    if i < len(s) and s[i] in "'\"":
        q, j = s[i], i + 1
        while j < len(s) and s[j] != q:
            j += 2 if s[j] == "\\" else 1
        if j >= len(s):
            raise CaptureError("bad-field", f"vllm-log: {what} is a string that does not end (a line cut short?)")
        return ast.literal_eval(s[i:j + 1]), j + 1
    if i < len(s) and s[i] in "[(":
        j = s.find("]" if s[i] == "[" else ")", i)
        if j < 0:
            raise CaptureError("bad-field", f"vllm-log: {what} is a list that does not end (a line cut short?)")
        try:
            v = ast.literal_eval(s[i:j + 1])
        except (ValueError, SyntaxError):
            raise CaptureError("bad-field", f"vllm-log: {what} is not a list of token ids") from None
        if not all(type(x) is int for x in v):
            raise CaptureError("bad-field", f"vllm-log: {what} is not a list of token ids")
        return list(v), j + 1
    raise CaptureError("bad-field", f"vllm-log: {what} is neither a quoted string, a list nor None: {s[i:i + 40]!r}")


def _after(s: str, key: str, start: int, what: str) -> int:
    j = s.find(key, start)
    if j < 0:
        raise CaptureError("bad-field", f"vllm-log: no '{key.strip(', :')}' after {what} (a line cut short?)")
    return j + len(key)


def parse_line(text: str) -> tuple[str, str, dict] | None:
    """One log line as ``(kind, request id, fields)``, or None when it is not the request
    logger's. ``kind``: ``request`` (fields ``prompt``, ``prompt_token_ids``, ``params``), ``params``
    (no prompt), ``output`` / ``delta`` / ``complete`` (fields ``output``, ``output_token_ids``,
    ``finish_reason``). Raises :class:`CaptureError` (``bad-field``) for a line that is cut short."""
    m = _RECEIVED.search(text) or _DETAILS.search(text)
    if m:
        rid, i = m.group(1), m.end()
        if text.startswith("params: ", i):
            return "params", rid, {"params": text[i + 8:].rsplit(", lora_request", 1)[0]}
        if not text.startswith("prompt: ", i):
            return None
        prompt, i = _literal(text, i + 8, "prompt")
        fields: dict[str, Any] = {"prompt": prompt}
        if text.startswith(", params: ", i):
            j = _after(text, ", prompt_token_ids: ", i, "params")
            fields["params"] = text[i + 10:j - len(", prompt_token_ids: ")]
        else:
            j = _after(text, ", prompt_token_ids: ", i, "prompt")
        fields["prompt_token_ids"], _ = _literal(text, j, "prompt_token_ids")
        return "request", rid, fields
    m = _GENERATED.search(text)
    if m:
        rid, kind = m.group(1), {"streaming delta": "delta", "streaming complete": "complete"}.get(m.group(2) or "", "output")
        output, i = _literal(text, m.end(), "output")
        j = _after(text, ", output_token_ids: ", i, "output")
        ids, i = _literal(text, j, "output_token_ids")
        k = _after(text, ", finish_reason: ", i, "output_token_ids")
        finish = text[k:].strip()
        return kind, rid, {"output": output, "output_token_ids": ids, "finish_reason": None if finish == "None" else finish}
    return None


def read_log(path: Path, on_read: Callable[[int], None] | None = None, tokenizer: Any = None) -> Iterator[Unit]:
    """The units of a vLLM log file (rules: module docstring): one exchange per request id (at the
    line of its first line, yielded when its response is logged or at the end of the file), the
    other lines ``skipped`` with their reason, cut lines ``bad-field`` errors. ``tokenizer``:
    decodes the token ids (:func:`replay.capture.serverlog.record_from_log`)."""
    from replay.capture.jsonlines import mapped_units
    from replay.capture.serverlog import record_from_log

    model: str | None = None
    open_: dict[str, dict] = {}

    def finish(rid: str) -> Iterator[Unit]:
        st = open_.pop(rid)
        obj: dict[str, Any] = {"request_id": rid, "prompt": st.get("prompt"), "prompt_token_ids": st.get("prompt_token_ids"),
                               "output_token_ids": st.get("output_token_ids"), "output_text": st.get("output_text")}
        if model is not None:
            obj["model"] = model
        if obj["prompt"] is None and obj["prompt_token_ids"] is None and obj["output_token_ids"] is None and obj["output_text"] is None:
            obj["prompt_token_ids"] = []  # a request whose lines held nothing to read: an exchange lacking all
        yield from mapped_units(st["line"], st["offset"], st["raw"], obj, lambda o: record_from_log(o, tokenizer))

    for line, offset, raw in open_lines(path, on_read=on_read):
        if not raw.strip():
            yield Unit(line, offset, raw, blank=True)
            continue
        text = raw.decode("utf-8", errors="replace")
        if model is None and (mm := _MODEL.search(text)) and "Received request" not in text:
            model = mm.group(1) or mm.group(2)
        try:
            parsed = parse_line(text)
        except CaptureError as exc:
            yield failed(line, offset, exc.reason, exc.detail, raw)
            continue
        if parsed is None:
            if text.lstrip().startswith("{"):  # a JSON line is no log line of vLLM's: another format read as vllm-log
                try:
                    keys = ", ".join(list(orjson.loads(raw))[:8])
                except (orjson.JSONDecodeError, TypeError):
                    keys = "not JSON either"
                yield failed(line, offset, "bad-field", "vllm-log: not a vLLM log line: expected 'Received request ID: prompt: ...' or "
                                                        f"'Generated response ID: output: ...' lines; found a JSON object with keys: {keys}", raw)
                continue
            yield Unit(line, offset, raw, skipped=True, skip_reason="vllm-log: not a request-logger line")
            continue
        kind, rid, fields = parsed
        st = open_.get(rid)
        if st is None:
            st = open_[rid] = {"line": line, "offset": offset, "raw": raw}
        else:
            yield Unit(line, offset, raw, skipped=True, skip_reason="vllm-log: a line of a request already read (joined to its exchange)")
        if kind == "request":
            st["prompt"], st["prompt_token_ids"] = fields["prompt"], fields["prompt_token_ids"]
        elif kind == "output":
            st["output_token_ids"] = fields["output_token_ids"]
            yield from finish(rid)
        elif kind == "complete":
            out = fields["output"]
            if isinstance(out, str) and not _PLACEHOLDER.fullmatch(out):
                st["output_text"] = out
            yield from finish(rid)
    for rid in list(open_):
        yield from finish(rid)
