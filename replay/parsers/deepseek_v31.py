"""DeepSeek V3.1 / V3.1-Terminus tool calls: ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{JSON}<｜tool▁call▁end｜>``.

Output syntax (tool-call-formats.md §6): ``<｜tool▁calls▁begin｜>``, then per call
``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{ARGS}<｜tool▁call▁end｜>`` chained with no separator, then
``<｜tool▁calls▁end｜>``, optionally ``<｜end▁of▁sentence｜>``. The tokens are built here from
code points (U+FF5C FULLWIDTH VERTICAL LINE, U+2581 LOWER ONE EIGHTH BLOCK). Arguments are the
raw JSON object; a call's arguments string is ``json.dumps(json.loads(raw), ensure_ascii=False)``
as SGLang's ``DeepSeekV31Detector`` returns it.

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

* Section markers ``<｜tool▁calls▁begin｜>``, ``<｜tool▁calls▁end｜>`` and the end-of-sentence token
  never reach content: every occurrence outside a call is dropped, and so is every occurrence in
  the text of a block that turns out not to be a call. Calls are recognised with or without the
  enclosing section (SGLang looks for call blocks anywhere once the section start is present).
* A block starts at ``<｜tool▁call▁begin｜>``. Its name is the text up to the next marker, which
  must be ``<｜tool▁sep｜>`` and the name must be non-empty; otherwise the start marker and that
  text are plain content and parsing goes on at the marker found (or the text ends).
* After ``<｜tool▁sep｜>`` the arguments are read string-aware, as ``json.JSONDecoder().raw_decode``
  reads them after skipping JSON whitespace (so ``<｜tool▁call▁end｜>`` inside an argument string
  does not end the call; SGLang's regex would cut there). The block is a call when that value is
  a JSON object followed only by whitespace and ``<｜tool▁call▁end｜>``, or by whitespace up to the
  end of the text (an unterminated last call whose JSON is complete).
* A block that is not a call is content (minus section markers), verbatim; its extent is up to the
  first ``<｜tool▁call▁end｜>`` after the JSON value (or after ``<｜tool▁sep｜>`` when the JSON does
  not decode), or to the end of the text when there is none. Parsing goes on after it. (SGLang's
  whole-text parse returns the whole output as content on any error.)
* Everything else, including stray ``<｜tool▁sep｜>``/``<｜tool▁call▁end｜>`` outside a block and
  text after the section, is content verbatim.

Streaming: outside a block, text is emitted as soon as it cannot be the start of a block or
section marker (suffixes that are a prefix of one are held back); section markers are dropped.
A block is buffered until decided, then its call is sent in one tool-call delta (name once,
complete; arguments exactly the whole-text parse's string). The name is not sent at
``<｜tool▁sep｜>`` because a malformed body would make the block content.
Reasoning: a leading ``<think>...</think>`` (or, with ``reasoning_open`` — the V3.1 thinking
prompt ends with ``<think>`` — everything up to the first ``</think>``) is split off first, as
:mod:`replay.parsers._reasoning` defines.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from replay.parsers._block import Decided, JsonBlock
from replay.parsers._jsonscan import skip_ws
from replay.parsers._reasoning import THINK, ReasoningSplitter, split_reasoning
from replay.parsers.base import CallDelta, ParseResult, StreamDelta, ToolCall
from replay.parsers.hermes import partial_marker_suffix

_BAR = "\uff5c"  # FULLWIDTH VERTICAL LINE
_SP = "\u2581"  # LOWER ONE EIGHTH BLOCK


def _token(*words: str) -> str:
    return "<" + _BAR + _SP.join(words) + _BAR + ">"


CALLS_BEGIN = _token("tool", "calls", "begin")
CALL_BEGIN = _token("tool", "call", "begin")
SEP = _token("tool", "sep")
CALL_END = _token("tool", "call", "end")
CALLS_END = _token("tool", "calls", "end")
EOS = _token("end", "of", "sentence")

MARKERS = (CALLS_BEGIN, CALL_BEGIN, SEP, CALL_END, CALLS_END, EOS)
SECTION = (CALLS_BEGIN, CALLS_END, EOS)
OUTSIDE = (CALL_BEGIN, CALLS_BEGIN, CALLS_END, EOS)  # markers acted upon outside a block

_DECODER = json.JSONDecoder()
_SECTION_RE = re.compile("|".join(re.escape(m) for m in SECTION))


def _first_marker(text: str, markers: tuple[str, ...], start: int) -> tuple[int, str]:
    """(index, marker) of the earliest occurrence at or after ``start``; (-1, "") when none."""
    best, found = -1, ""
    for m in markers:
        i = text.find(m, start)
        if i >= 0 and (best < 0 or i < best):
            best, found = i, m
    return best, found


def drop_section_markers(text: str) -> str:
    """``text`` without its occurrences of the section and end-of-sentence markers."""
    return _SECTION_RE.sub("", text)


class DeepSeekV31Parser:
    """Tool parser for DeepSeek V3.1 and V3.1-Terminus.

    Mirrors SGLang ``DeepSeekV31Detector`` (and vLLM ``DeepSeekV31ToolParser``) in syntax; the
    rules for malformed output are this module's (see the module docstring). ``tools`` is accepted
    and ignored.
    """

    name: ClassVar[str] = "deepseek_v31"
    covers: ClassVar[str] = "DeepSeek V3.1, V3.1-Terminus: tool calls without the function type word or code fence"
    markers: ClassVar[tuple[str, ...]] = MARKERS

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        self.tools = tools
        self._reasoning_open = reasoning_open
        self._think = ReasoningSplitter(THINK, open=reasoning_open)
        self._buf = ""
        self._in_block = False
        self._name = ""
        self._body: JsonBlock | None = None  # None until the open block's name is read
        self._index = 0
        self._finished = False

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion) -> reasoning, content and calls, per the
        module rules (reasoning split off first, :mod:`replay.parsers._reasoning`)."""
        reasoning, body = split_reasoning(text, THINK, open=self._reasoning_open)
        result = self._parse_body(body)
        return ParseResult(content=result.content, calls=result.calls, reasoning=reasoning)

    def _parse_body(self, text: str) -> ParseResult:
        content: list[str] = []
        calls: list[ToolCall] = []
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
                content.append(text[i:])
                break
            if mark != SEP or q == p:
                content.append(text[i:q])
                pos = q
                continue
            name = text[p:q]
            j = skip_ws(text, q + len(SEP))
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
        return ParseResult(content="".join(content), calls=tuple(calls))

    # ---------------------------------------------------------------- streaming
    def feed(self, delta: str) -> StreamDelta:
        """Streaming parse: take the next delta (text); return content and tool-call deltas."""
        if self._finished:
            raise RuntimeError("feed() after finish(): construct a new parser per stream")
        reasoning, body = self._think.feed(delta)
        self._buf += body
        out = self._drain(final=False)
        out.reasoning = reasoning
        return out

    def finish(self) -> StreamDelta:
        """End of stream: decide the open block (if any), release held-back text."""
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
            decided = self._advance(final)
            if decided is None:
                break
            end, span = decided
            raw = "" if span is None else self._buf[span[0] : span[1]]
            call = None if span is None else self._call(raw)
            if call is None:
                parts.append(drop_section_markers(self._buf[:end]))
            else:
                out.calls.extend(self._emit_call(self._index, call[0], call[1], raw))
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
            q, mark = _first_marker(buf, MARKERS, p)
            if q < 0:
                return Decided(len(buf), None) if final else None
            if mark != SEP or q == p:
                return Decided(q, None)
            self._name = buf[p:q]
            self._body = JsonBlock(CALL_END, q + len(SEP))
        return self._body.advance(buf, final)

    def _call(self, raw: str) -> tuple[str, str] | None:
        obj = json.loads(raw)
        if not isinstance(obj, dict):
            return None
        return self._name, json.dumps(obj, ensure_ascii=False)
