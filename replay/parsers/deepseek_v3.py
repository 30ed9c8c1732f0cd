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

Streaming: the reasoning splitter, then the engine of
:class:`~replay.parsers._family.GrammarParser` over the same grammar
(:class:`~replay.parsers._sections.SectionParser` with :meth:`DeepSeekV3Parser.read_call`):
outside a block text is emitted as soon as it cannot start a block or section marker; a block is
read again when a marker arrives, or once the line after its name is long enough to tell the
fence (:class:`FenceWake`), and its call sent in one tool-call delta once decided (name once,
arguments exactly the whole-text string).

Choices where the upstream suites differ (tests/conformance, ``KNOWN`` in tests/test_conformance.py):

* llama.cpp's lenient reader accepts ``<｜tool▁calls｜>`` (a misspelt section token) with no
  ``<｜tool▁call▁begin｜>``; replay reads the family's tokens only.
* ``<｜end▁of▁sentence｜>`` is an end token (``end_tokens``): removed from the raw text in both paths.
"""

from __future__ import annotations

from typing import ClassVar

from replay.parsers._block import object_arguments, read_json_block
from replay.parsers._reasoning import THINK
from replay.parsers._sections import Tokens, TokenWake
from replay.parsers.base import ToolCall
from replay.parsers.deepseek_v31 import (
    CALL_BEGIN,
    CALL_END,
    CALLS_BEGIN,
    CALLS_END,
    EOS,
    MARKERS,
    SEP,
    TOKENS,
    DeepSeekV31Parser,
)

FENCE_OPEN = "```json"
FENCE_END = "```" + CALL_END

__all__ = ["DeepSeekV3Parser", "CALLS_BEGIN", "CALL_BEGIN", "SEP", "CALL_END", "CALLS_END", "EOS", "FENCE_OPEN", "FENCE_END"]


def read_call(text: str, s: int, final: bool = True) -> tuple[int, list[ToolCall] | None] | None:
    """The call grammar: the block at the ``<｜tool▁call▁begin｜>`` at ``s`` -> ``(end, [call] or
    None)``: TYPE up to the next marker, which must be ``<｜tool▁sep｜>``; NAME up to a newline
    (no marker before it), then exactly ```` ```json ````, the JSON object, whitespace and
    ```` ```<｜tool▁call▁end｜> ```` (module docstring). None on a prefix that cannot decide it yet."""
    n = len(text)
    q, mark = TOKENS.next(text, s + len(CALL_BEGIN))
    if q < 0:
        return (n, None) if final else None
    if mark != SEP:
        return q, None
    p = q + len(SEP)
    nl = text.find("\n", p)
    r, _ = TOKENS.next(text, p, n if nl < 0 else nl)
    if r >= 0:
        return r, None
    if nl < 0:
        return (n, None) if final else None
    name = text[p:nl].strip()
    f = nl + 1
    if not name or not text.startswith(FENCE_OPEN, f):
        got = text[f : f + len(FENCE_OPEN)]
        if not final and name and len(got) < len(FENCE_OPEN) and FENCE_OPEN.startswith(got):
            return None  # the fence may be arriving
        return f, None
    got = read_json_block(text, f + len(FENCE_OPEN), FENCE_END, open_end=False, final=final)
    if got is None:
        return None
    args = object_arguments(got[1])
    return got[0], None if args is None else [ToolCall(name, args)]


class FenceWake(TokenWake):
    """:class:`~replay.parsers._sections.TokenWake` on the family's markers, and once more when
    the text after the newline that ends the name (the first newline after ``<｜tool▁sep｜>``)
    tells whether the fence opens there (it is the fence, or can no longer become it): a block
    whose name line is not followed by the fence is content at once, not at the next marker.
    Each character is scanned a bounded number of times."""

    def __init__(self, tokens: Tokens, seek: int) -> None:
        super().__init__(tokens, seek)
        self._stage, self._pos = "sep", seek  # sep -> line -> fence -> off

    def wake(self, buf: str, final: bool) -> bool:
        """True when a marker arrived (:class:`~replay.parsers._sections.TokenWake`) or the fence
        after the name line can now be told (``buf``: the block from index 0)."""
        hit = super().wake(buf, final)
        if self._stage == "sep":
            q = buf.find(SEP, self._pos)
            if q < 0:
                self._pos = max(self._pos, len(buf) - len(SEP) + 1)
                return hit
            self._stage, self._pos = "line", q + len(SEP)
        if self._stage == "line":
            nl = buf.find("\n", self._pos)
            if nl < 0:
                self._pos = len(buf)
                return hit
            self._stage, self._pos = "fence", nl + 1
        if self._stage == "fence":
            got = buf[self._pos : self._pos + len(FENCE_OPEN)]
            if len(got) == len(FENCE_OPEN) or not FENCE_OPEN.startswith(got):
                self._stage = "off"
                return True
        return hit


class DeepSeekV3Parser(DeepSeekV31Parser):
    """Tool parser for DeepSeek V3, V3-0324, R1 and R1-0528 (fenced-JSON call format).

    Mirrors SGLang ``DeepSeekV3Detector`` and vLLM ``DeepSeekV3ToolParser`` in syntax; the rules
    for malformed output are this module's (see the module docstring), and the closing fence need
    not be preceded by a newline. The tokens, sections and end token are V3.1's (the class it
    extends); the call grammar and its wake rule are V3's own. ``tools`` is accepted and ignored.
    ``reasoning_open=True``: the prompt opened ``<think>`` (R1).
    """

    name: ClassVar[str] = "deepseek_v3"
    markers: ClassVar[tuple[str, ...]] = (*MARKERS, *THINK)
    covers: ClassVar[str] = "deepseek-ai/DeepSeek-V3, V3-0324, DeepSeek-R1, R1-0528 (and R1 distills served with their tool template)"

    def read_call(self, text: str, s: int, final: bool) -> tuple[int, list[ToolCall] | None] | None:
        """The call grammar (:func:`read_call`)."""
        return read_call(text, s, final)

    def call_wake(self, seek: int) -> TokenWake:
        """A block is read again when a marker arrives, or once the fence can be told (:class:`FenceWake`)."""
        return FenceWake(self._wake_tokens, seek)
