"""Kimi K2 (Instruct, 0905, Thinking) tool calls: ``<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{JSON}<|tool_call_end|>``.

Output syntax (tool-call-formats.md §8): ``<|tool_calls_section_begin|>``, then per call
``<|tool_call_begin|>`` ID ``<|tool_call_argument_begin|>`` ARGS ``<|tool_call_end|>`` (calls
concatenated, whitespace between them tolerated), then ``<|tool_calls_section_end|>``. ID is
``functions.NAME:IDX`` (IDX a counter, conversation-wide in K2-Thinking); ARGS is the raw JSON
object. K2-Thinking writes ``<think>...</think>`` first.

Facts checked against public implementations (the doc marked them unconfirmed): vLLM's
``kimi_k2_tool_parser.py`` lists the singular spellings ``<|tool_call_section_begin|>`` /
``<|tool_call_section_end|>`` as variants "some Kimi K2 checkpoints emit" and accepts both;
vLLM's ``kimi_k2`` reasoning parser ends the reasoning section implicitly at a section-begin
token (either spelling) when ``</think>`` has not come (its tests ``IMPLICIT_END_WITH_TOOL_CALL``,
``IMPLICIT_END_SINGULAR_VARIANT``), the marker staying in the content.

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

* Reasoning: the shared rule of :mod:`replay.parsers._reasoning` (section at the very start, or
  opened by the prompt with ``reasoning_open=True``; ends at the first ``</think>``, which is
  dropped with the whitespace after it), plus vLLM's implicit end: inside the reasoning section a
  section-begin token (either spelling) before any ``</think>`` ends the reasoning there, and the
  body starts at that token.
* Section markers (both spellings of begin and end) never reach content: every occurrence outside
  a call is dropped, and so is every occurrence in the text of a block that is not a call. Calls
  are recognised with or without the enclosing section (vLLM requires the section; SGLang looks
  for calls once the section start is present; llama.cpp's tests feed bare calls).
* A block starts at ``<|tool_call_begin|>``. Its ID is the text up to the next marker, which must
  be ``<|tool_call_argument_begin|>``; the ID, stripped of whitespace, must end in ``:`` + ASCII
  digits, and the name is what comes before that colon with a leading ``functions.`` removed; it
  must be non-empty. (vLLM takes ``id.split(":")[0].split(".")[-1]``, mangling names with ``.``
  or ``:``; SGLang's ``[\\w.]+`` drops names with ``-``; here the name is kept whole.) Otherwise
  the start marker and the ID text are plain content and parsing goes on at the marker found.
* After ``<|tool_call_argument_begin|>`` the arguments are read string-aware, as
  ``json.JSONDecoder().raw_decode`` reads them after JSON whitespace (so ``<|tool_call_end|>``
  inside a string does not end the call). The block is a call when that value is a JSON object
  followed only by whitespace and ``<|tool_call_end|>``, or by whitespace up to the end of the text
  (an unterminated last call whose JSON is complete). Arguments: ``json.dumps(obj,
  ensure_ascii=False)`` (vLLM returns the raw text; SGLang streams it raw).
* A block that is not a call is content (minus section markers), verbatim, up to the first
  ``<|tool_call_end|>`` after the JSON value (after the argument marker when the JSON does not
  decode), or to the end of the text. A call whose next marker is another ``<|tool_call_begin|>``
  (the end token missing) is therefore not a call (llama.cpp's lenient reader accepts it).
* Everything else (stray ``<|tool_call_end|>`` or argument markers, text after the section) is
  content verbatim.

Streaming: the reasoning splitter first, then a buffered state machine: outside a block text is
emitted as soon as it cannot start a block or section marker; a block is buffered until decided
and its call sent in one tool-call delta (name once, complete; arguments exactly the whole-text
string). The ID and the JSON are scanned incrementally (each character examined a bounded number
of times).
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from replay.parsers._block import Decided, JsonBlock
from replay.parsers._jsonscan import skip_ws
from replay.parsers._reasoning import THINK
from replay.parsers.base import CallDelta, ParseResult, StreamDelta, ToolCall
from replay.parsers.hermes import partial_marker_suffix

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_BEGIN_SINGULAR = "<|tool_call_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
SECTION_END_SINGULAR = "<|tool_call_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARG_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"

SECTION = (SECTION_BEGIN, SECTION_BEGIN_SINGULAR, SECTION_END, SECTION_END_SINGULAR)
CALL_MARKERS = (CALL_BEGIN, ARG_BEGIN, CALL_END)
MARKERS = SECTION + CALL_MARKERS
OUTSIDE = (CALL_BEGIN, *SECTION)  # markers acted upon outside a block
IMPLICIT_REASONING_END = (SECTION_BEGIN, SECTION_BEGIN_SINGULAR)

_DECODER = json.JSONDecoder()
_SECTION_RE = re.compile("|".join(re.escape(m) for m in SECTION))
_IDX = re.compile(r":[0-9]+\Z")
_LONGEST = max(len(m) for m in MARKERS)


def _first_marker(text: str, markers: tuple[str, ...], start: int) -> tuple[int, str]:
    """(index, marker) of the earliest occurrence at or after ``start`` (chars); (-1, "") when none."""
    best, found = -1, ""
    for m in markers:
        i = text.find(m, start)
        if i >= 0 and (best < 0 or i < best):
            best, found = i, m
    return best, found


def drop_section_markers(text: str) -> str:
    """``text`` without its occurrences of the section markers (both spellings)."""
    return _SECTION_RE.sub("", text)


def name_from_id(call_id: str) -> str | None:
    """The function name of a Kimi call ID (``functions.NAME:IDX``), or None when the ID is not of
    that shape: stripped, it must end in ``:`` + digits, and the part before (with a leading
    ``functions.`` removed) must be non-empty."""
    s = call_id.strip()
    m = _IDX.search(s)
    if m is None:
        return None
    name = s[: m.start()]
    if name.startswith("functions."):
        name = name[len("functions.") :]
    return name or None


def split_kimi_reasoning(text: str, *, open: bool = False) -> tuple[str, str]:
    """``(reasoning, body)`` of a whole completion (chars): the shared ``<think>`` rule plus the
    implicit end at a section-begin token (which stays in the body)."""
    start, end = THINK
    if not open:
        stripped = text.lstrip()
        if not stripped.startswith(start):
            return "", text
        text = stripped[len(start) :]
    e, mark = _first_marker(text, (end, *IMPLICIT_REASONING_END), 0)
    if e < 0:
        return text, ""
    if mark == end:
        return text[:e], text[e + len(end) :].lstrip()
    return text[:e], text[e:]


class KimiReasoningSplitter:
    """Streaming form of :func:`split_kimi_reasoning`: ``feed(delta)`` / ``finish()`` return
    ``(reasoning fragment, body fragment)`` that join to the whole-text split under any chunking."""

    _ENDS = (THINK[1], *IMPLICIT_REASONING_END)

    def __init__(self, *, open: bool = False) -> None:
        self.state = "in" if open else "head"  # head -> in -> gap -> body
        self.buf = ""

    def feed(self, delta: str) -> tuple[str, str]:
        """Take the next delta (text); return the reasoning and body text now decided."""
        self.buf += delta
        reasoning: list[str] = []
        body: list[str] = []
        start, end = THINK
        while True:
            if self.state == "head":
                stripped = self.buf.lstrip()
                if stripped.startswith(start):
                    self.buf = stripped[len(start) :]
                    self.state = "in"
                    continue
                if start.startswith(stripped):
                    break
                self.state, text, self.buf = "body", self.buf, ""
                body.append(text)
                break
            if self.state == "in":
                e, mark = _first_marker(self.buf, self._ENDS, 0)
                if e >= 0:
                    reasoning.append(self.buf[:e])
                    if mark == end:
                        self.buf = self.buf[e + len(end) :]
                        self.state = "gap"
                        continue
                    body.append(self.buf[e:])
                    self.buf, self.state = "", "body"
                    break
                keep = partial_marker_suffix(self.buf, self._ENDS)
                reasoning.append(self.buf[: len(self.buf) - keep])
                self.buf = self.buf[len(self.buf) - keep :]
                break
            if self.state == "gap":
                rest = self.buf.lstrip()
                if rest:
                    self.state = "body"
                    body.append(rest)
                self.buf = ""
                break
            body.append(self.buf)
            self.buf = ""
            break
        return "".join(reasoning), "".join(body)

    def finish(self) -> tuple[str, str]:
        """End of stream: release what is held back, as ``(reasoning, body)``."""
        buf, self.buf = self.buf, ""
        if self.state == "head":
            return "", buf
        if self.state == "in":
            return buf, ""
        return "", ""


class KimiK2Parser:
    """Tool parser for Kimi K2 (Instruct, 0905) and Kimi K2-Thinking.

    Mirrors vLLM ``KimiK2ToolParser`` and SGLang ``KimiK2Detector`` in syntax (tokens, ID form,
    both section spellings as vLLM); the rules for malformed output, the name taken whole from the
    ID and the arguments re-serialized are this module's (see the module docstring). ``tools`` is
    accepted and ignored (the arguments are JSON). ``reasoning_open=True``: the prompt opened
    ``<think>``.
    """

    name: ClassVar[str] = "kimi_k2"
    markers: ClassVar[tuple[str, ...]] = (*MARKERS, *THINK)
    covers: ClassVar[str] = "moonshotai/Kimi-K2-Instruct(-0905), Kimi-K2-Thinking, Kimi-K2.5 (the <|tool_call_begin|> token format)"

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        self.tools = tools
        self._reasoning_open = reasoning_open
        self._think = KimiReasoningSplitter(open=reasoning_open)
        self._buf = ""
        self._in_block = False
        self._name: str | None = None
        self._seek = 0  # where to look for the header's closing marker next (chars, in _buf)
        self._body: JsonBlock | None = None  # None until the open block's ID is read
        self._index = 0
        self._finished = False

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion) -> reasoning, content and calls, per the
        module rules."""
        reasoning, body = split_kimi_reasoning(text, open=self._reasoning_open)
        content: list[str] = []
        calls: list[ToolCall] = []
        text = body
        n = len(text)
        pos = 0
        while True:
            i, mark = _first_marker(text, OUTSIDE, pos)
            if i < 0:
                content.append(text[pos:])
                break
            content.append(text[pos:i])
            if mark != CALL_BEGIN:
                pos = i + len(mark)
                continue
            p = i + len(CALL_BEGIN)
            q, mark = _first_marker(text, MARKERS, p)
            if q < 0:
                content.append(drop_section_markers(text[i:]))
                break
            name = name_from_id(text[p:q]) if mark == ARG_BEGIN else None
            if name is None:
                content.append(text[i:q])
                pos = q
                continue
            j = skip_ws(text, q + len(ARG_BEGIN))
            try:
                obj, k = _DECODER.raw_decode(text, j)
            except json.JSONDecodeError:
                e = text.find(CALL_END, j)
                end = n if e < 0 else e + len(CALL_END)
                content.append(drop_section_markers(text[i:end]))
                pos = end
                continue
            m = skip_ws(text, k)
            if text.startswith(CALL_END, m):
                end = m + len(CALL_END)
                ok = isinstance(obj, dict)
            elif m == n:
                end = n
                ok = isinstance(obj, dict)
            else:
                e = text.find(CALL_END, k)
                end = n if e < 0 else e + len(CALL_END)
                ok = False
            if ok:
                calls.append(ToolCall(name, json.dumps(obj, ensure_ascii=False)))
            else:
                content.append(drop_section_markers(text[i:end]))
            pos = end
        return ParseResult(content="".join(content), calls=tuple(calls), reasoning=reasoning)

    # ---------------------------------------------------------------- streaming
    def feed(self, delta: str) -> StreamDelta:
        """Streaming parse: take the next delta (text); return reasoning, content and tool-call
        deltas. Raises RuntimeError after :meth:`finish`."""
        if self._finished:
            raise RuntimeError("feed() after finish(): construct a new parser per stream")
        reasoning, body = self._think.feed(delta)
        self._buf += body
        out = self._drain(final=False)
        out.reasoning = reasoning
        return out

    def finish(self) -> StreamDelta:
        """End of stream: decide the open block (a complete JSON object is a call), release
        held-back text. A second call returns an empty delta."""
        if self._finished:
            return StreamDelta()
        reasoning, body = self._think.finish()
        self._buf += body
        out = self._drain(final=True)
        out.reasoning = reasoning
        self._finished = True
        return out

    def _emit_call(self, index: int, name: str, arguments: str, raw: str) -> list[CallDelta]:
        """The tool-call deltas sent for one decided call (``raw``: the model's JSON text)."""
        return [CallDelta(index=index, name=name, arguments=arguments)]

    def _drain(self, final: bool) -> StreamDelta:
        out = StreamDelta()
        parts: list[str] = []
        while True:
            if not self._in_block:
                i, mark = _first_marker(self._buf, OUTSIDE, 0)
                if i < 0:
                    keep = 0 if final else partial_marker_suffix(self._buf, OUTSIDE)
                    cut = len(self._buf) - keep
                    parts.append(self._buf[:cut])
                    self._buf = self._buf[cut:]
                    break
                parts.append(self._buf[:i])
                if mark != CALL_BEGIN:
                    self._buf = self._buf[i + len(mark) :]
                    continue
                self._buf = self._buf[i:]
                self._in_block = True
                self._body = None
                self._seek = len(CALL_BEGIN)
            decided = self._advance(final)
            if decided is None:
                break
            end, span = decided
            call = None
            if span is not None:
                raw = self._buf[span[0] : span[1]]
                obj = json.loads(raw)
                if isinstance(obj, dict) and self._name is not None:
                    call = (self._name, json.dumps(obj, ensure_ascii=False), raw)
            if call is None:
                parts.append(drop_section_markers(self._buf[:end]))
            else:
                out.calls.extend(self._emit_call(self._index, *call))
                self._index += 1
            self._buf = self._buf[end:]
            self._in_block = False
        out.content = "".join(parts)
        return out

    def _advance(self, final: bool) -> Decided | None:
        """Move the open block on; None while undecided, else (block end, JSON span or None)."""
        buf = self._buf
        if self._body is None:
            p = len(CALL_BEGIN)
            q, mark = _first_marker(buf, MARKERS, self._seek)
            if q < 0:
                if final:
                    return Decided(len(buf), None)
                self._seek = max(self._seek, len(buf) - _LONGEST + 1)
                return None
            self._name = name_from_id(buf[p:q]) if mark == ARG_BEGIN else None
            if self._name is None:
                return Decided(q, None)
            self._body = JsonBlock(CALL_END, q + len(ARG_BEGIN))
        return self._body.advance(buf, final)
