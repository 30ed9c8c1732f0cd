"""DeepSeek V3.1 / V3.1-Terminus tool calls: ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{JSON}<｜tool▁call▁end｜>``.

Output syntax (tool-call-formats.md §6): ``<｜tool▁calls▁begin｜>``, then per call
``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{ARGS}<｜tool▁call▁end｜>`` chained with no separator, then
``<｜tool▁calls▁end｜>``, optionally ``<｜end▁of▁sentence｜>``. The tokens are built here from
code points (U+FF5C FULLWIDTH VERTICAL LINE, U+2581 LOWER ONE EIGHTH BLOCK). Arguments are the
raw JSON object; a call's arguments string is ``json.dumps(json.loads(raw), ensure_ascii=False)``
as SGLang's ``DeepSeekV31Detector`` returns it.

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

* Sections (README content rules; :func:`~replay.parsers._family.parse_sectioned`): a section
  runs from ``<｜tool▁calls▁begin｜>`` to the next ``<｜tool▁calls▁end｜>`` or the end of the text.
  A section holding at least one call is framing: its markers are dropped and the rest of its
  text is content verbatim. A section holding no call is content verbatim, markers included
  (``<｜tool▁calls▁begin｜>nonsense<｜tool▁calls▁end｜>`` stays as it is: SGLang's whole-text parse
  returns the whole output on a bad block; replay once dropped the markers and kept the rest, as
  no engine does). Calls are recognised with or without the enclosing section (SGLang looks for
  call blocks anywhere once the section start is present).
* A block starts at ``<｜tool▁call▁begin｜>``. Its name is the text up to the next marker, which
  must be ``<｜tool▁sep｜>`` and the name must be non-empty; otherwise the start marker and that
  text are plain content and parsing goes on at the marker found (or the text ends).
* After ``<｜tool▁sep｜>`` the arguments are read string-aware, as ``json.JSONDecoder().raw_decode``
  reads them after skipping JSON whitespace (so ``<｜tool▁call▁end｜>`` inside an argument string
  does not end the call; SGLang's regex would cut there). The block is a call when that value is
  a JSON object followed only by whitespace and ``<｜tool▁call▁end｜>``. A value nested deeper than
  :data:`~replay.parsers._jsonscan.MAX_DEPTH` is not a call.
* A call cut off by the end of the output (complete JSON, no ``<｜tool▁call▁end｜>``) is no call:
  SGLang's ``DeepSeekV31Detector`` matches calls only up to the end marker (the seed rule of
  ``finish()``: a call is reported once complete with its end token). Its text is content.
* A block that is not a call is content, verbatim, markers included (the Hermes rule); its extent
  is up to the first ``<｜tool▁call▁end｜>`` after the JSON value (or after ``<｜tool▁sep｜>`` when
  the JSON does not decode), or to the end of the text when there is none. Parsing goes on after
  it.
* Everything else, including stray ``<｜tool▁sep｜>``/``<｜tool▁call▁end｜>``/``<｜tool▁calls▁end｜>``
  outside a block or section and text after the section, is content verbatim.

Streaming (:class:`~replay.parsers._family.SectionedParser`): outside a section, text is emitted
as soon as it cannot be the start of a block or section marker (suffixes that are a prefix of one
are held back); inside a section it is held until the section's first call (then emitted without
the markers) or its end (then emitted verbatim). A block is buffered until decided, then its call is sent in one tool-call delta (name once,
complete; arguments exactly the whole-text parse's string). The name is not sent at
``<｜tool▁sep｜>`` because a malformed body would make the block content.
Reasoning: a leading ``<think>...</think>`` (or, with ``reasoning_open`` — the V3.1 thinking
prompt ends with ``<think>`` — everything up to the first ``</think>``) is split off first, as
:mod:`replay.parsers._reasoning` defines.

End token ``<｜end▁of▁sentence｜>`` (``end_tokens``) is removed from the raw text in both paths.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from replay.parsers._block import Decided, JsonBlock, object_arguments, read_json_block
from replay.parsers._family import SectionedParser, parse_sectioned
from replay.parsers._markers import first_marker
from replay.parsers._reasoning import THINK, ReasoningSplitter, split_reasoning
from replay.parsers.base import ParseResult, ToolCall

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

_SECTION_RE = re.compile("|".join(re.escape(m) for m in SECTION))


def drop_section_markers(text: str) -> str:
    """``text`` without its occurrences of the section and end-of-sentence markers."""
    return _SECTION_RE.sub("", text)


def _read_block(text: str, i: int, mark: str) -> tuple[int, list[ToolCall] | None]:
    """Whole text: the block at the ``<｜tool▁call▁begin｜>`` at ``i`` -> ``(end, [call] or None)``."""
    p = i + len(CALL_BEGIN)
    q, mark = first_marker(text, MARKERS, p)
    if q < 0:
        return len(text), None
    if mark != SEP or q == p:
        return q, None
    end, obj = read_json_block(text, q + len(SEP), CALL_END, open_end=False)
    args = object_arguments(obj)
    return end, None if args is None else [ToolCall(text[p:q], args)]


class DeepSeekV31Parser(SectionedParser):
    """Tool parser for DeepSeek V3.1 and V3.1-Terminus.

    Mirrors SGLang ``DeepSeekV31Detector`` (and vLLM ``DeepSeekV31ToolParser``) in syntax; the
    rules for malformed output are this module's (see the module docstring). ``tools`` is accepted
    and ignored.
    """

    name: ClassVar[str] = "deepseek_v31"
    covers: ClassVar[str] = "DeepSeek V3.1, V3.1-Terminus: tool calls without the function type word or code fence"
    markers: ClassVar[tuple[str, ...]] = MARKERS
    call_starts: ClassVar[tuple[str, ...]] = (CALLS_BEGIN, CALL_BEGIN)  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = (EOS,)
    CALL_BEGIN = CALL_BEGIN
    SECTION_BEGINS = (CALLS_BEGIN,)
    SECTION_ENDS = (CALLS_END,)

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        super().__init__(tools, ReasoningSplitter(THINK, open=reasoning_open))
        self._reasoning_open = reasoning_open
        self._body: JsonBlock | None = None  # None until the open block's name is read

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion) -> reasoning, content and calls, per the
        module rules (reasoning split off first, :mod:`replay.parsers._reasoning`)."""
        text = self.strip_end_tokens(text)
        reasoning, text = split_reasoning(text, THINK, open=self._reasoning_open)
        content, calls = parse_sectioned(text, CALL_BEGIN, (CALLS_BEGIN,), (CALLS_END,), _read_block)
        return ParseResult(content=content, calls=tuple(calls), reasoning=reasoning)

    # ---------------------------------------------------------------- streaming
    def _open_block(self) -> None:
        self._body = None

    def _advance(self, final: bool) -> Decided | None:
        """Move the open block on; None while undecided, else (block end, JSON span or None)."""
        buf = self._buf
        if self._body is None:
            p = len(CALL_BEGIN)
            q, mark = first_marker(buf, MARKERS, p)
            if q < 0:
                return Decided(len(buf), None) if final else None
            if mark != SEP or q == p:
                return Decided(q, None)
            self._name = buf[p:q]
            self._body = JsonBlock(CALL_END, q + len(SEP), open_end=False)
        return self._body.advance(buf, final)
