"""DeepSeek V3 / V3-0324 / R1 / R1-0528 tool calls: ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`` + fenced JSON.

Output syntax (tool-call-formats.md §5): ``<｜tool▁calls▁begin｜>``, then per call
``<｜tool▁call▁begin｜>`` TYPE ``<｜tool▁sep｜>`` NAME, a newline, ```` ```json ````, the arguments
JSON object, ```` ``` ```` and ``<｜tool▁call▁end｜>`` (calls usually separated by a newline), then
``<｜tool▁calls▁end｜>`` and optionally ``<｜end▁of▁sentence｜>``. TYPE is ``function``. R1 models
write ``<think>...</think>`` first. The tokens are those of :mod:`replay.parsers.deepseek_v31`
(built from code points there).

Facts checked against public implementations: SGLang's ``DeepSeekV3Detector`` and vLLM's
``DeepSeekV3ToolParser`` match a call as TYPE ``<｜tool▁sep｜>`` NAME ``\\n```json\\n`` ARGS
``\\n```<｜tool▁call▁end｜>`` and ignore TYPE; llama.cpp's test outputs (corpus
``deepseek_r1_v3.jsonl``) also write ```` {...}```<｜tool▁call▁end｜> ```` with no newline before
the closing fence, which this module accepts (whitespace around the JSON is free).

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

* Reasoning is split off first by the shared ``<think>`` rule (:mod:`replay.parsers._reasoning`;
  ``reasoning_open=True`` when the prompt opened it, as R1's template does).
* Sections as in :mod:`replay.parsers.deepseek_v31` (one base, README content rules): a section
  holding a call is framing (``<｜tool▁calls▁begin｜>``/``<｜tool▁calls▁end｜>`` dropped), one holding
  none is content verbatim, markers included; calls are recognised with or without the section.
* A block starts at ``<｜tool▁call▁begin｜>``. The next marker must be ``<｜tool▁sep｜>`` (the TYPE
  text before it is ignored, as upstream); otherwise the start marker and that text are content
  and parsing goes on at the marker found (or the text ends).
* After ``<｜tool▁sep｜>`` the name runs to the first newline; a marker before it (or the end of
  the text) makes the block content up to that marker. The name, stripped, must be non-empty,
  and the newline must be followed by exactly ```` ```json ````; otherwise the block is content up
  to and including that newline and parsing goes on after it.
* Then the arguments are read string-aware (``json.JSONDecoder().raw_decode`` after JSON
  whitespace). The block is a call when that value is a JSON object followed only by whitespace
  and ```` ```<｜tool▁call▁end｜> ```` (fence and end token adjacent, as every writer emits them).
  A call cut off by the end of the output (complete JSON, no fence and end token) is no call, as
  SGLang's ``DeepSeekV3Detector`` and vLLM's ``DeepSeekV3ToolParser`` match calls only up to the
  end token (README content rules; replay once reported it). A block cut
  anywhere else, or whose JSON is not an object or is followed by other text, is content up to
  the first ```` ```<｜tool▁call▁end｜> ```` after the JSON value (after the
  fence opening when the JSON does not decode), or to the end of the text; it is content verbatim,
  markers included. (Upstream whole-text parses return the whole output as content on any error.)
* A value nested deeper than :data:`~replay.parsers._jsonscan.MAX_DEPTH` is not an object here
  (so not a call). Arguments: ``json.dumps(obj, ensure_ascii=False)``. Everything else (text between calls, stray
  ``<｜tool▁sep｜>``/``<｜tool▁call▁end｜>``, markdown fences in prose — which SGLang strips) is
  content verbatim.

Streaming: the reasoning splitter, then a buffered state machine (outside a block text is
emitted as soon as it cannot start a block or section marker; a block is buffered, its header
scanned incrementally, its JSON by :class:`~replay.parsers._block.JsonBlock`, and its call sent
in one tool-call delta once decided: name once, arguments exactly the whole-text string).

Choices where the upstream suites differ (tests/conformance, ``KNOWN`` in tests/test_conformance.py):

* llama.cpp's lenient reader accepts ``<｜tool▁calls｜>`` (a misspelt section token) with no
  ``<｜tool▁call▁begin｜>``; replay reads the family's tokens only.
* ``<｜end▁of▁sentence｜>`` is an end token (``end_tokens``): removed from the raw text in both paths.
"""

from __future__ import annotations

from typing import Any, ClassVar

from replay.parsers._block import Decided, JsonBlock, object_arguments, read_json_block
from replay.parsers._family import SectionedParser, parse_sectioned
from replay.parsers._markers import first_marker
from replay.parsers._reasoning import THINK, ReasoningSplitter, split_reasoning
from replay.parsers.base import ParseResult, ToolCall
from replay.parsers.deepseek_v31 import (
    CALL_BEGIN,
    CALL_END,
    CALLS_BEGIN,
    CALLS_END,
    EOS,
    MARKERS,
    SEP,
)

FENCE_OPEN = "```json"
FENCE_END = "```" + CALL_END

_LONGEST = max(len(m) for m in MARKERS)

__all__ = ["DeepSeekV3Parser", "CALLS_BEGIN", "CALL_BEGIN", "SEP", "CALL_END", "CALLS_END", "EOS", "FENCE_OPEN", "FENCE_END"]


def _read_block(text: str, i: int, mark: str) -> tuple[int, list[ToolCall] | None]:
    """Whole text: the block at the ``<｜tool▁call▁begin｜>`` at ``i`` -> ``(end, [call] or None)``."""
    n = len(text)
    q, mark = first_marker(text, MARKERS, i + len(CALL_BEGIN))
    if q < 0:
        return n, None
    if mark != SEP:
        return q, None
    s = q + len(SEP)
    nl = text.find("\n", s)
    r, _ = first_marker(text, MARKERS, s, n if nl < 0 else nl)
    if r >= 0 or nl < 0:
        return (n if r < 0 else r), None
    name = text[s:nl].strip()
    if not name or not text.startswith(FENCE_OPEN, nl + 1):
        return nl + 1, None
    end, obj = read_json_block(text, nl + 1 + len(FENCE_OPEN), FENCE_END, open_end=False)
    args = object_arguments(obj)
    return end, None if args is None else [ToolCall(name, args)]


class DeepSeekV3Parser(SectionedParser):
    """Tool parser for DeepSeek V3, V3-0324, R1 and R1-0528 (fenced-JSON call format).

    Mirrors SGLang ``DeepSeekV3Detector`` and vLLM ``DeepSeekV3ToolParser`` in syntax; the rules
    for malformed output are this module's (see the module docstring), and the closing fence need
    not be preceded by a newline. ``tools`` is accepted and ignored. ``reasoning_open=True``: the
    prompt opened ``<think>`` (R1).
    """

    name: ClassVar[str] = "deepseek_v3"
    markers: ClassVar[tuple[str, ...]] = (*MARKERS, *THINK)
    call_starts: ClassVar[tuple[str, ...]] = (CALLS_BEGIN, CALL_BEGIN)  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = (EOS,)
    covers: ClassVar[str] = "deepseek-ai/DeepSeek-V3, V3-0324, DeepSeek-R1, R1-0528 (and R1 distills served with their tool template)"

    CALL_BEGIN = CALL_BEGIN
    SECTION_BEGINS = (CALLS_BEGIN,)
    SECTION_ENDS = (CALLS_END,)

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        super().__init__(tools, ReasoningSplitter(THINK, open=reasoning_open))
        self._reasoning_open = reasoning_open
        self._stage = "type"  # type -> name -> fence -> body
        self._seek = 0  # header: next index (chars in _buf) to search from
        self._nl = 0  # header: index of the newline ending the name
        self._name_start = 0  # header: index of the name's first char
        self._body: JsonBlock | None = None

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion) -> reasoning, content and calls, per the
        module rules."""
        text = self.strip_end_tokens(text)
        reasoning, text = split_reasoning(text, THINK, open=self._reasoning_open)
        content, calls = parse_sectioned(text, CALL_BEGIN, (CALLS_BEGIN,), (CALLS_END,), _read_block)
        return ParseResult(content=content, calls=tuple(calls), reasoning=reasoning)

    # ---------------------------------------------------------------- streaming
    def _open_block(self) -> None:
        self._stage, self._seek, self._body = "type", len(CALL_BEGIN), None

    def _advance(self, final: bool) -> Decided | None:
        """Move the open block on; None while undecided, else (block end, JSON span or None)."""
        buf = self._buf
        n = len(buf)
        if self._stage == "type":
            q, mark = first_marker(buf, MARKERS, self._seek)
            if q < 0:
                if final:
                    return Decided(n, None)
                self._seek = max(self._seek, n - _LONGEST + 1)
                return None
            if mark != SEP:
                return Decided(q, None)
            self._stage = "name"
            self._name_start = self._seek = self._nl = q + len(SEP)
        if self._stage == "name":
            nl = buf.find("\n", self._nl)
            r, _ = first_marker(buf, MARKERS, self._seek, n if nl < 0 else nl)
            if r >= 0:
                return Decided(r, None)
            if nl < 0:
                if final:
                    return Decided(n, None)
                self._nl = n
                self._seek = max(self._seek, n - _LONGEST + 1)
                return None
            self._name = buf[self._name_start : nl].strip() or None
            self._nl = nl
            self._stage = "fence"
        if self._stage == "fence":
            f = self._nl + 1
            got = buf[f : f + len(FENCE_OPEN)]
            if not self._name or not FENCE_OPEN.startswith(got):
                return Decided(f, None)
            if len(got) < len(FENCE_OPEN):
                return Decided(f, None) if final else None
            self._body = JsonBlock(FENCE_END, f + len(FENCE_OPEN), open_end=False)
            self._stage = "body"
        assert self._body is not None
        return self._body.advance(buf, final)
