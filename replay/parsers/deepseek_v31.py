"""DeepSeek V3.1 / V3.1-Terminus tool calls: ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{JSON}<｜tool▁call▁end｜>``.

Output syntax (tool-call-formats.md §6): ``<｜tool▁calls▁begin｜>``, then per call
``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{ARGS}<｜tool▁call▁end｜>`` chained with no separator, then
``<｜tool▁calls▁end｜>``, optionally ``<｜end▁of▁sentence｜>``. The tokens are built here from
code points (U+FF5C FULLWIDTH VERTICAL LINE, U+2581 LOWER ONE EIGHTH BLOCK). Arguments are the
raw JSON object; a call's arguments string is ``json.dumps(json.loads(raw), ensure_ascii=False)``
as SGLang's ``DeepSeekV31Detector`` returns it.

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

* Sections (README content rules; :mod:`replay.parsers._sections`): a section
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

Streaming: the engine of :class:`~replay.parsers._family.GrammarParser` over the same grammar
(:class:`~replay.parsers._sections.SectionParser` with :meth:`DeepSeekV31Parser.read_call`):
outside a section, text is emitted as soon as it cannot be the start of a block or section marker
(suffixes that are a prefix of one are held back); inside a section it is held until the
section's first call (then emitted without the markers) or its end (then emitted verbatim). A
block is read again when a marker arrives, and its call is sent in one tool-call delta once
decided (name once, complete; arguments exactly the whole-text parse's string). The name is not
sent at ``<｜tool▁sep｜>`` because a malformed body would make the block content.
Reasoning: a leading ``<think>...</think>`` (or, with ``reasoning_open`` — the V3.1 thinking
prompt ends with ``<think>`` — everything up to the first ``</think>``) is split off first, as
:mod:`replay.parsers._reasoning` defines.

End token ``<｜end▁of▁sentence｜>`` (``end_tokens``) is removed from the raw text in both paths.
"""

from __future__ import annotations

from typing import ClassVar

from replay.parsers._block import object_arguments, read_json_block
from replay.parsers._reasoning import THINK
from replay.parsers._sections import SectionParser, Tokens
from replay.parsers.base import ToolCall

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
TOKENS = Tokens(MARKERS)  # the next marker, found in time linear in the distance to it


class DeepSeekV31Parser(SectionParser):
    """Tool parser for DeepSeek V3.1 and V3.1-Terminus.

    Mirrors SGLang ``DeepSeekV31Detector`` (and vLLM ``DeepSeekV31ToolParser``) in syntax; the
    rules for malformed output are this module's (see the module docstring). ``tools`` is accepted
    and ignored. ``reasoning_open=True``: the prompt opened ``<think>`` (thinking mode).
    """

    name: ClassVar[str] = "deepseek_v31"
    covers: ClassVar[str] = "DeepSeek V3.1, V3.1-Terminus: tool calls without the function type word or code fence"
    markers: ClassVar[tuple[str, ...]] = MARKERS
    call_starts: ClassVar[tuple[str, ...]] = (CALLS_BEGIN, CALL_BEGIN)  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = (EOS,)
    CALL_BEGIN = CALL_BEGIN
    SECTION_BEGINS = (CALLS_BEGIN,)
    SECTION_ENDS = (CALLS_END,)
    CALL_END = CALL_END
    WAKE = MARKERS
    THINK = THINK

    def read_call(self, text: str, s: int, final: bool) -> tuple[int, list[ToolCall] | None] | None:
        """The call grammar: the block at the ``<｜tool▁call▁begin｜>`` at ``s`` -> ``(end, [call]
        or None)``: NAME up to the next marker, which must be ``<｜tool▁sep｜>``; then the JSON
        object, whitespace and ``<｜tool▁call▁end｜>`` (module docstring). None on a prefix that
        cannot decide it yet."""
        p = s + len(CALL_BEGIN)
        q, mark = TOKENS.next(text, p)
        if q < 0:
            return (len(text), None) if final else None
        if mark != SEP or q == p:
            return q, None
        got = read_json_block(text, q + len(SEP), CALL_END, open_end=False, final=final)
        if got is None:
            return None
        args = object_arguments(got[1])
        return got[0], None if args is None else [ToolCall(text[p:q], args)]
