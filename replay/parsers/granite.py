"""IBM Granite tool calls: Granite 3.x ``<|tool_call|>[JSON list]`` and Granite 4 ``<tool_call>`` JSON.

Two parsers, because the two generations write different syntaxes (tool-call-formats.md §13) and
vLLM registers them separately (``--tool-call-parser granite`` and ``granite4``):

**Granite 3.x** (:class:`GraniteParser`, name ``granite``): ``<|tool_call|>`` (a special token in
3.0; vLLM notes that 3.1 may write the plain string ``<tool_call>``) followed by one JSON **array**
``[{"name": ..., "arguments": {...}}, ...]``; no end marker. Granite 3.2/3.3 thinking mode (the
granite-3.3 template's system text) writes ``<think>...</think><response>...</response>``.

Checked against public implementations (facts only): vLLM ``GraniteToolParser`` strips the output,
then a leading ``<|tool_call|>`` or ``<tool_call>``, requires the rest to start with ``[`` and
``json.loads`` it whole (so text after the array makes the output content); anything else, or any
error, makes the whole output content; ``arguments`` is required. llama.cpp's Granite handler
splits ``<think>`` and strips the ``<response>`` wrapper. vLLM's ``granite`` reasoning parser
instead looks for "Here is my thought process:" / "Here is my response:" (Granite 3.2 prose
markers): not handled here.

Reference behaviour of :class:`GraniteParser` (shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

1. Reasoning: a leading ``<think>...</think>`` (with ``reasoning_open``, everything up to the first
   ``</think>``) is split off by :mod:`replay.parsers._reasoning`. Then, when what remains starts
   (after whitespace) with ``<response>``, that wrapper is removed by the same rule with the tags
   ``<response>``/``</response>``: the text inside and the text after ``</response>`` (whitespace
   after the end tag dropped) are joined; an unclosed ``<response>`` runs to the end.
2. A **block** starts at each ``<|tool_call|>`` or ``<tool_call>`` (anywhere: vLLM requires it at
   the start of the output; text before it is content here) and its span runs to the next start
   marker of either kind or to the end of the text.
3. The JSON after the marker (after JSON whitespace) is read string-aware
   (``json.JSONDecoder().raw_decode``). The block is a call block when that value is followed
   only by whitespace up to the next start marker or the end, and is a non-empty list of objects
   each with a string ``name`` and an object ``arguments`` (vLLM's requirements; extra keys such
   as ``id`` ignored). Each item is one call; its arguments are ``json.dumps(arguments,
   ensure_ascii=False)``. A value nested deeper than :data:`~replay.parsers._jsonscan.MAX_DEPTH`
   is never a call.
4. A block that is not a call block is content, verbatim, marker included. Its extent: up to the
   first start marker after the JSON value when the value decodes, after the JSON start when it
   does not (or only whitespace follows the marker), or the end of the text. (vLLM turns the whole
   output into content.)
5. Content is all other text verbatim; the whitespace between a call block's array and the next
   marker or the end belongs to the block. ``tools`` is accepted and ignored.

Streaming: reasoning and response splitters, then the engine of
:class:`~replay.parsers._family.GrammarParser` over the same grammar (:func:`read_block`): outside
a block text is emitted unless it may be the start of a start marker; a block is read again when
the next start marker arrives (which ends it, unconsumed), or at ``finish()`` -- so a call block at the end of the output is
reported by ``finish()`` (more text could still make it content). Each call is sent in one
tool-call delta: name once, complete, arguments exactly the whole-text string.

**Granite 4** (:class:`Granite4Parser`, name ``granite4``): Hermes-style blocks
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` with text allowed around them (the
granite-4.0/4.1 templates instruct exactly this). It is :class:`~replay.parsers.hermes.HermesParser`
under another name, with Hermes's rules for malformed output; vLLM ``Granite4ToolParser`` differs:
any malformed block (two starts in a row, end without start, empty or unterminated call) turns the
whole output into content, and it has no ``parameters`` synonym.

Choices where the upstream suites differ (tests/conformance, ``KNOWN`` in tests/test_conformance.py):

* llama.cpp's generic JSON fallback (``{"tool_calls": [...]}``) is not Granite syntax; replay
  reads ``<|tool_call|>`` lists (and Granite 4's ``<tool_call>`` blocks) only.
* ``"arguments"`` given as a JSON string is a call (:func:`replay.parsers._block.arguments_text`),
  as in Hermes; end token ``<|end_of_text|>`` is removed from the raw text in both paths.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from replay.parsers._block import arguments_text, read_json_block
from replay.parsers._family import GrammarParser
from replay.parsers._reasoning import THINK, ReasoningSplitter, split_reasoning
from replay.parsers.base import ToolCall
from replay.parsers.hermes import HermesParser

TOOL_CALL = "<|tool_call|>"
TOOL_CALL_PLAIN = "<tool_call>"
STARTS = (TOOL_CALL, TOOL_CALL_PLAIN)
RESPONSE = ("<response>", "</response>")


def calls_from_value(obj: Any) -> list[tuple[str, str]] | None:
    """``[(name, arguments JSON text)]`` when ``obj`` is a non-empty list of Granite call objects
    (dicts with a ``str`` ``name`` and an object or string ``arguments``, read by
    :func:`replay.parsers._block.arguments_text`), else None."""
    if not isinstance(obj, list) or not obj:
        return None
    out: list[tuple[str, str]] = []
    for item in obj:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        args = arguments_text(item.get("arguments"))
        if args is None:
            return None
        out.append((item["name"], args))
    return out


def split_granite_reasoning(text: str, *, open: bool = False) -> tuple[str, str]:
    """``(reasoning, body)`` of a whole completion: ``<think>`` split off, then the
    ``<response>`` wrapper removed (rule 1 of the module docstring)."""
    reasoning, body = split_reasoning(text, THINK, open=open)
    inside, after = split_reasoning(body, RESPONSE)
    return reasoning, inside + after


def read_block(text: str, s: int, mark: str, final: bool = True) -> tuple[int, list[ToolCall] | None] | None:
    """The grammar: the block at ``s`` (up to the next start marker) -> ``(end, calls or None)``;
    None on a stream's prefix that cannot decide it yet."""
    got = read_json_block(text, s + len(mark), STARTS, consume=False, final=final)
    if got is None:
        return None
    found = calls_from_value(got[1])
    return got[0], None if found is None else [ToolCall(nm, args) for nm, args in found]


class GraniteSplitter:
    """Streaming form of :func:`split_granite_reasoning` (the ``<think>`` splitter, then the
    ``<response>`` one on its body): ``feed``/``finish`` give ``(reasoning, body)`` fragments."""

    def __init__(self, *, open: bool = False) -> None:
        self._think = ReasoningSplitter(THINK, open=open)
        self._response = ReasoningSplitter(RESPONSE)

    def feed(self, delta: str) -> tuple[str, str]:
        reasoning, body = self._think.feed(delta)
        inside, after = self._response.feed(body)
        return reasoning, inside + after

    def finish(self) -> tuple[str, str]:
        reasoning, body = self._think.finish()
        inside, after = self._response.feed(body)
        inside2, after2 = self._response.finish()
        return reasoning, inside + after + inside2 + after2


class GraniteParser(GrammarParser):
    """Tool parser for Granite 3.x (``<|tool_call|>`` + JSON list), with ``<think>`` reasoning and
    the ``<response>`` wrapper of Granite 3.3 thinking mode.

    Mirrors vLLM ``GraniteToolParser`` in syntax; deliberate differences (module docstring): the
    marker may follow content, several blocks are read, a malformed block is content while well-formed
    ones stay calls. ``tools`` is accepted and ignored. ``reasoning_open=True``: the prompt opened
    ``<think>``.
    """

    name: ClassVar[str] = "granite"
    covers: ClassVar[str] = "IBM Granite 3.0-3.3 instruct (<|tool_call|> + JSON list; 3.3 <think>/<response>)"
    markers: ClassVar[tuple[str, ...]] = (TOOL_CALL, TOOL_CALL_PLAIN, *THINK, *RESPONSE)
    call_starts: ClassVar[tuple[str, ...]] = STARTS  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = ("<|end_of_text|>",)
    STARTS = STARTS
    WAKE = STARTS

    def splitter(self) -> GraniteSplitter:
        return GraniteSplitter(open=self._reasoning_open)

    def split_whole(self, text: str) -> tuple[str, str]:
        return split_granite_reasoning(text, open=self._reasoning_open)

    read = staticmethod(read_block)  # the grammar (:data:`~replay.parsers._family.Grammar`)


class Granite4Parser(HermesParser):
    """Tool parser for Granite 4.x: Hermes-style ``<tool_call>{"name", "arguments"}</tool_call>``
    blocks with text around them.

    The syntax and the malformed-output rules are :class:`~replay.parsers.hermes.HermesParser`'s
    (which it is, under another name; ``<think>`` reasoning is split as there, harmless for Granite
    4 which does not reason). Mirrors vLLM ``Granite4ToolParser`` in syntax; vLLM differs on
    malformed output (the whole output becomes content) and has no ``parameters`` synonym.
    """

    name: ClassVar[str] = "granite4"
    covers: ClassVar[str] = "IBM Granite 4.0 / 4.1 (<tool_call> JSON </tool_call>, as Hermes)"
