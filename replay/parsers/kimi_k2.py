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
* Sections (README content rules; :mod:`replay.parsers._sections`): a section
  runs from a section-begin token (either spelling) to the next section-end token (either
  spelling) or the end of the text. A section holding at least one call is framing: its tokens
  are dropped and the rest of its text is content verbatim. A section holding no call is content
  verbatim, markers included (replay once dropped the section tokens and kept the rest, which no
  engine does). A stray section-end token with no section open is content (SGLang's
  ``test_invalid_tool_call`` keeps it). Calls are recognised with or without the enclosing
  section (vLLM requires the section; SGLang looks for calls once the section start is present;
  llama.cpp's tests feed bare calls).
* A block starts at ``<|tool_call_begin|>``. Its ID is the text up to the next marker, which must
  be ``<|tool_call_argument_begin|>``; the ID, stripped of whitespace, must end in ``:`` + ASCII
  digits, and the name is what comes before that colon with a leading ``functions.`` removed; it
  must be non-empty. (vLLM takes ``id.split(":")[0].split(".")[-1]``, mangling names with ``.``
  or ``:``; SGLang's ``[\\w.]+`` drops names with ``-``; here the name is kept whole.) Otherwise
  the start marker and the ID text are plain content and parsing goes on at the marker found.
* After ``<|tool_call_argument_begin|>`` the arguments are read string-aware, as
  ``json.JSONDecoder().raw_decode`` reads them after JSON whitespace (so ``<|tool_call_end|>``
  inside a string does not end the call). The block is a call when that value is a JSON object
  followed only by whitespace and ``<|tool_call_end|>``; a value nested deeper than
  :data:`~replay.parsers._jsonscan.MAX_DEPTH` is not a call. Arguments: ``json.dumps(obj,
  ensure_ascii=False)`` (vLLM returns the raw text; SGLang streams it raw).
* A call cut off by the end of the output (complete JSON, no ``<|tool_call_end|>``) is no call:
  vLLM's and SGLang's whole-text regexes match a call only up to ``<|tool_call_end|>`` (llama.cpp's
  lenient reader takes it: ``KNOWN`` in tests/test_conformance.py). Its text is content.
* A block that is not a call is content, verbatim, markers included (the Hermes rule; vLLM and
  SGLang instead drop every text after the section begin), up to the first
  ``<|tool_call_end|>`` after the JSON value (after the argument marker when the JSON does not
  decode), or to the end of the text. A call whose next marker is another ``<|tool_call_begin|>``
  (the end token missing) is therefore not a call (llama.cpp's lenient reader accepts it).
* Everything else (stray ``<|tool_call_end|>`` or argument markers, text after the section) is
  content verbatim.

Streaming: the reasoning splitter first, then the engine of
:class:`~replay.parsers._family.GrammarParser` over the same grammar
(:class:`~replay.parsers._sections.SectionParser` with :meth:`KimiK2Parser.read_call`): outside a
section text is emitted as soon as it cannot start a block or section marker, inside one it is
held until the section's first call or its end; a block is read again when a marker arrives and
its call sent in one tool-call delta once decided (name once, complete; arguments exactly the
whole-text string).

Choices where the upstream suites differ (tests/conformance, ``KNOWN`` in tests/test_conformance.py):

* llama.cpp's lenient reader takes calls without ``<|tool_call_end|>`` when another
  ``<|tool_call_begin|>`` follows; replay needs the end token (a call cut off is no call).
* End token ``<|im_end|>`` is removed from the raw text in both paths.
"""

from __future__ import annotations

import re
from typing import ClassVar

from replay.parsers._block import object_arguments, read_json_block
from replay.parsers._reasoning import THINK
from replay.parsers._sections import SectionParser, Tokens
from replay.parsers.base import ToolCall

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_BEGIN_SINGULAR = "<|tool_call_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
SECTION_END_SINGULAR = "<|tool_call_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARG_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"

SECTION_BEGINS = (SECTION_BEGIN, SECTION_BEGIN_SINGULAR)
SECTION_ENDS = (SECTION_END, SECTION_END_SINGULAR)
MARKERS = (*SECTION_BEGINS, *SECTION_ENDS, CALL_BEGIN, ARG_BEGIN, CALL_END)
IMPLICIT_REASONING_END = SECTION_BEGINS
_TOKENS = Tokens(MARKERS)  # the next marker, found in time linear in the distance to it

_IDX = re.compile(r":[0-9]+\Z")


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


class KimiK2Parser(SectionParser):
    """Tool parser for Kimi K2 (Instruct, 0905) and Kimi K2-Thinking.

    Mirrors vLLM ``KimiK2ToolParser`` and SGLang ``KimiK2Detector`` in syntax (tokens, ID form,
    both section spellings as vLLM); the rules for malformed output, the name taken whole from the
    ID and the arguments re-serialized are this module's (see the module docstring). ``tools`` is
    accepted and ignored (the arguments are JSON). ``reasoning_open=True``: the prompt opened
    ``<think>``.
    """

    name: ClassVar[str] = "kimi_k2"
    markers: ClassVar[tuple[str, ...]] = (*MARKERS, *THINK)
    call_starts: ClassVar[tuple[str, ...]] = (SECTION_BEGIN, SECTION_BEGIN_SINGULAR, CALL_BEGIN)  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = ("<|im_end|>",)
    covers: ClassVar[str] = "moonshotai/Kimi-K2-Instruct(-0905), Kimi-K2-Thinking, Kimi-K2.5 (the <|tool_call_begin|> token format)"
    CALL_BEGIN = CALL_BEGIN
    SECTION_BEGINS = SECTION_BEGINS
    SECTION_ENDS = SECTION_ENDS
    CALL_END = CALL_END
    WAKE = MARKERS
    THINK = THINK
    IMPLICIT_ENDS = IMPLICIT_REASONING_END

    def read_call(self, text: str, s: int, final: bool) -> tuple[int, list[ToolCall] | None] | None:
        """The call grammar: the block at the ``<|tool_call_begin|>`` at ``s`` -> ``(end, [call]
        or None)``: an ID (:func:`name_from_id`) up to the next marker, which must be
        ``<|tool_call_argument_begin|>``; then the JSON object, whitespace and
        ``<|tool_call_end|>`` (module docstring). None on a prefix that cannot decide it yet."""
        p = s + len(CALL_BEGIN)
        q, mark = _TOKENS.next(text, p)
        if q < 0:
            return (len(text), None) if final else None
        name = name_from_id(text[p:q]) if mark == ARG_BEGIN else None
        if name is None:
            return q, None
        got = read_json_block(text, q + len(ARG_BEGIN), CALL_END, open_end=False, final=final)
        if got is None:
            return None
        args = object_arguments(got[1])
        return got[0], None if args is None else [ToolCall(name, args)]
