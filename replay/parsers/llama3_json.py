"""Llama 3.1 / 3.2 / 3.3 JSON tool calls: bare ``{"name": ..., "parameters": {...}}`` objects.

Output syntax (tool-call-formats.md §3): a call is a bare JSON object ``{"name": NAME,
"parameters": {...}}`` (``"arguments"`` is accepted too; when both are present ``arguments`` wins,
as in :func:`replay.parsers.hermes.call_from_object`), optionally preceded by the
``<|python_tag|>`` special token. vLLM (``Llama3JsonToolParser``) and SGLang (``Llama32Detector``)
accept several objects separated by ``;`` (vLLM's streaming path assumes exactly ``"; "``);
SGLang also accepts a JSON array of call objects. The official 3.1/3.3 template allows one call
per turn. Nothing marks the end of a call: the call ends where its JSON object ends.

Checked against public implementations (facts only): vLLM's whole-text parse ``raw_decode``s every
``{`` and returns the whole output as content (no calls) when any decoded object is not a call;
its streaming path only enters tool mode when the text *starts* with ``<|python_tag|>`` or ``{``.
SGLang's detector treats text before the first ``<|python_tag|>`` as normal text, decodes the rest
as an object or array, else repeatedly ``raw_decode``s stepping over ``;``. llama.cpp additionally
parses the Llama 3.1 *built-in* tool syntax ``<|python_tag|>NAME.call(k="v")``; vLLM and SGLang do
not, and neither does this module (that text is content).

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

* An **item** is JSON whitespace then one JSON value, read as ``json.JSONDecoder().raw_decode``
  reads it (string-aware). It is a call item when the value is a call object (a dict with a string
  ``name`` and a dict ``arguments``, else a dict ``parameters``) or a non-empty array of call
  objects (one call each, in order). A value that starts with anything but ``{`` or ``[``, does
  not decode, is nested deeper than :data:`~replay.parsers._jsonscan.MAX_DEPTH`, or is not of that
  shape is not a call item. The call (or calls) end at the closing
  ``}`` / ``]`` of the value: streaming sends them as soon as it arrives.
* Items are tried at three places only: (1) at the start of the output, when its first
  non-whitespace character is ``{`` or ``[`` (the leading whitespace stays content); (2) right
  after every ``<|python_tag|>`` (the tag and the whitespace after it belong to the call item and
  are dropped; when no call item follows, the tag is content, verbatim); (3) right after a call
  item, across a separator of optional whitespace, an optional ``;``, optional whitespace (the
  separator is dropped when a call item follows it; newline-separated or adjacent objects are
  accepted too, vLLM's 2-character skip is not assumed).
* Everything else is content, verbatim: text before the first call, text after the last call of a
  chain (from the character right after its ``}``/``]``, separators included), and every item
  that is not a call item (from where it was tried). Such text is read on for ``<|python_tag|>``
  (so a tag inside a failed item's string starts a new attempt). A ``{`` in the middle of prose
  is never a call (vLLM's whole-text parse would try it; its streaming would not).
* ``<|eot_id|>`` / ``<|eom_id|>`` (and ``<|end_of_text|>``, Llama 4's ``<|eot|>`` / ``<|eom|>``)
  are end-of-turn tokens a server strips: both paths remove them from the raw text first
  (``end_tokens``), so a captured one is not content.
* Unterminated output: an item whose JSON is cut off by the end of the stream is not a call; its
  text is content. A separator at the end of the stream is content.

Streaming: a buffered state machine. Outside items, text is emitted as soon as it cannot be the
start of ``<|python_tag|>``. An item is scanned once, incrementally (:class:`JsonPrefix`), while
its text is kept; when the value completes it is decoded and its calls sent in one tool-call delta
each (name once, arguments exactly the whole-text parse's ``json.dumps(..., ensure_ascii=False)``);
a failed item's kept text is read again as prose. ``finish()`` decides a pending item (it cannot
be a call: a call object ends in ``}``, which is decided at once) and releases held-back text.
Time is linear in the output except when failed items contain further ``<|python_tag|>``s, each
of which is scanned again.

Choices where the upstream suites differ (tests/conformance, ``KNOWN`` in tests/test_conformance.py):

* SGLang's ``Llama32Detector`` retries at the next ``{`` after a malformed object
  (``{"name": "f", "parameters": {{"name": ...}}``); replay: a ``{`` in the middle of text is never
  a call (the rule above), so the whole text is content.
* The Llama 3.1 built-in tool syntax ``<|python_tag|>NAME.call(...)`` is read by llama.cpp only
  (not vLLM/SGLang ``llama3_json``); replay leaves it as content.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from replay.parsers._family import NoReasoning, StreamParser
from replay.parsers._jsonscan import DONE, MORE, JsonPrefix, decode_at, loads_or_too_deep, skip_ws
from replay.parsers._markers import find_marker
from replay.parsers.base import ParseResult, StreamDelta, ToolCall
from replay.parsers.hermes import call_from_object

PYTHON_TAG = "<|python_tag|>"
EOT = "<|eot_id|>"
EOM = "<|eom_id|>"


def calls_from_value(value: Any) -> list[tuple[str, str]] | None:
    """The calls of one decoded item value, ``[(name, arguments JSON text), ...]``, or None.

    ``value``: a call object (one call) or a non-empty list of call objects (one call each); see
    :func:`replay.parsers.hermes.call_from_object`. Anything else -> None (not a call item).
    """
    if isinstance(value, dict):
        call = call_from_object(value)
        return None if call is None else [call]
    if isinstance(value, list) and value:
        calls = [call_from_object(v) for v in value]
        if all(c is not None for c in calls):
            return calls  # type: ignore[return-value]
    return None


def _decode_item(text: str, j: int) -> tuple[list[tuple[str, str]], int] | None:
    """Whole-text: the call item whose value starts at ``text[j]`` -> (calls, end index), or None."""
    if j >= len(text) or text[j] not in "{[":
        return None
    try:
        value, k = decode_at(text, j)
    except json.JSONDecodeError:
        return None
    calls = calls_from_value(value)
    return None if calls is None else (calls, k)


class Llama3JsonParser(StreamParser):
    """Tool parser for Llama 3.x bare-JSON tool calls (``llama3_json``).

    Mirrors vLLM ``Llama3JsonToolParser`` and SGLang ``Llama32Detector`` in syntax (objects with
    ``name`` and ``parameters``/``arguments``, optional ``<|python_tag|>``, ``;`` between calls,
    SGLang's JSON array). Deliberate differences, all in the module docstring: one non-call JSON
    object does not turn the whole output into content (vLLM), prose before a call is kept (vLLM
    drops it), leading whitespace does not disable tool parsing (vLLM streaming), a ``{`` in the
    middle of prose is not a call. ``tools`` is accepted and ignored (calls to undeclared tools are
    reported; the values are JSON, no schema typing). ``reasoning_open`` is accepted for a uniform
    constructor and ignored: Llama 3 has no reasoning section.
    """

    name: ClassVar[str] = "llama3_json"
    markers: ClassVar[tuple[str, ...]] = (PYTHON_TAG, EOT, EOM)
    call_starts: ClassVar[tuple[str, ...]] = (PYTHON_TAG,)  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|eot|>", "<|eom|>")
    covers: ClassVar[str] = (
        "Llama 3.1 / 3.2 / 3.3 Instruct (and fine-tunes) with JSON tool calls; vLLM llama3_json / llama4_json, SGLang llama3"
    )

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        super().__init__(tools, NoReasoning())
        self._mode = "head"  # head | prose | item | sep
        self._origin = ""  # why the open item was tried: head | tag | sep
        self._pos = 0  # item/sep: where the whitespace scan goes on (index in _buf)
        self._j = -1  # item: start of the JSON value in _buf, -1 while in leading whitespace
        self._scan: JsonPrefix | None = None
        self._fed = 0  # item: _buf index up to which the scanner was fed

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion, chars) -> content and calls per the module
        rules. Never raises on malformed output."""
        text = self.strip_end_tokens(text)
        content: list[str] = []
        calls: list[ToolCall] = []
        pos = 0
        j = skip_ws(text, 0)
        item = _decode_item(text, j)
        if item is not None:
            content.append(text[:j])
            pos = self._chain(text, item, calls)
        while True:
            t = text.find(PYTHON_TAG, pos)
            if t < 0:
                content.append(text[pos:])
                break
            content.append(text[pos:t])
            s = t + len(PYTHON_TAG)
            item = _decode_item(text, skip_ws(text, s))
            if item is None:
                content.append(PYTHON_TAG)
                pos = s
            else:
                pos = self._chain(text, item, calls)
        return ParseResult(content="".join(content), calls=tuple(calls))

    @staticmethod
    def _chain(text: str, item: tuple[list[tuple[str, str]], int], calls: list[ToolCall]) -> int:
        """Take a call item and the call items chained after it; return where prose resumes."""
        while True:
            found, k = item
            calls.extend(ToolCall(n, a) for n, a in found)
            m = skip_ws(text, k)
            if text.startswith(";", m):
                m = skip_ws(text, m + 1)
            nxt = _decode_item(text, m)
            if nxt is None:
                return k
            item = nxt

    # ---------------------------------------------------------------- streaming
    def _start_item(self, origin: str, pos: int) -> None:
        self._mode, self._origin, self._pos, self._j = "item", origin, pos, -1
        self._scan = None

    def _fail_item(self, parts: list[str]) -> None:
        """The open item is not a call item: its text is read again as prose."""
        if self._origin == "tag":
            parts.append(PYTHON_TAG)
        self._mode = "prose"

    def _drain(self, final: bool) -> StreamDelta:
        out = StreamDelta()
        parts: list[str] = []
        while True:
            buf = self._buf
            if self._mode == "head":
                j = skip_ws(buf, 0)
                parts.append(buf[:j])
                self._buf = buf = buf[j:]
                if not buf:
                    break
                if buf[0] in "{[":
                    self._start_item("head", 0)
                else:
                    self._mode = "prose"
                continue
            if self._mode == "prose":
                t, mark = find_marker(buf, (PYTHON_TAG,), final)
                parts.append(buf[:t])
                self._buf = buf[t + len(mark) :]
                if not mark:
                    break
                self._start_item("tag", 0)
                continue
            if self._mode == "sep":  # a call item ended at _buf[0]
                m = self._pos = skip_ws(buf, self._pos)
                if m == len(buf):
                    if not final:
                        break
                    self._mode = "prose"
                    continue
                if buf[m] == ";":
                    self._start_item("sep", m + 1)
                else:
                    self._start_item("sep", m)
                continue
            # item
            if self._j < 0:
                j = self._pos = skip_ws(buf, self._pos)
                if j == len(buf):
                    if not final:
                        break
                    self._fail_item(parts)
                    continue
                if buf[j] not in "{[":
                    self._fail_item(parts)
                    continue
                self._j = self._fed = j
                self._scan = JsonPrefix()
            assert self._scan is not None
            status = self._scan.feed(buf[self._fed :])
            self._fed = len(buf)
            if status == MORE and final:
                status = self._scan.close()
            if status == MORE:
                break
            calls = None
            if status == DONE:
                assert self._scan.end is not None
                k = self._j + self._scan.end
                raw = buf[self._j : k]
                calls = calls_from_value(loads_or_too_deep(raw))
            if calls is None:
                self._fail_item(parts)
                continue
            for name, arguments in calls:
                self._send(out, name, arguments, raw)
            self._buf = buf[k:]
            self._mode, self._pos = "sep", 0
        out.content = "".join(parts)
        return out
