"""The shared ``<function=NAME><parameter=KEY>VALUE</parameter></function>`` call grammar.

Used by Qwen3-Coder (``<tool_call>`` ... ``</tool_call>``, :mod:`replay.parsers.qwen3_coder`) and
Seed-OSS (``<seed:tool_call>`` ... ``</seed:tool_call>``, :mod:`replay.parsers.seed_oss`); the
family modules only set the block and reasoning tags. This module holds the format rules, the
grammar (:func:`read_call_block`) and the parser class both families derive from.

Block grammar (ws = space, tab, LF, CR; all positions and lengths in chars)::

    START ws* "<function=" NAME ">" ( ws* PARAM )* ws* "</function>" ws* END
    PARAM = "<parameter=" KEY ">" VALUE [ "</parameter>" ]

Reference rules (this module's definition; the whole-text parse and the stream run the same
grammar, and the tests check that they agree under every chunking):

* A block starts at START and extends to the first END after it (END included), or to the end
  of the text when there is none. The END search does not look at the structure, so a value can
  never contain END (the upstream regexes ``START(.*?)END`` cut there too).
* NAME and KEY are the text after ``=`` up to the first ``>``, taken verbatim; they must not
  contain ``<``, and NAME must not be empty (KEY may be empty, as upstream).
* VALUE runs to the first ``</parameter>``, ``<parameter=`` or ``</function>`` after the ``>``
  (SGLang ``Qwen3CoderDetector``'s parameter regex); only ``</parameter>`` is consumed, so a
  missing ``</parameter>`` is tolerated when the next parameter or ``</function>`` follows.
  Exactly one leading ``\\n`` and one trailing ``\\n`` are removed (the template writes
  ``>\\nVALUE\\n<``; Seed-OSS's template writes ``>VALUE<``, so there is nothing to remove), then
  the value is typed by the request's schema with :func:`replay.parsers._schema.convert_value`.
  A key given twice keeps its first position and its last value (a Python dict).
* The block is a call only when it has exactly that shape and is complete through
  ``</function>`` followed by nothing but whitespace up to END, or up to the end of the text (a
  stream that stopped after ``</function>``). The call's arguments are
  ``json.dumps({key: typed value, ...}, ensure_ascii=False)``; no parameters give ``"{}"``. A
  value typed as JSON and nested deeper than :data:`~replay.parsers._jsonscan.MAX_DEPTH` makes the
  block no call (content, as any other bad block).
* Any other block (text outside the grammar, two ``<function=`` in one block, a block cut off
  before ``</function>``) is content, verbatim from START through END (or the end of the text),
  and parsing goes on after it. The upstream parsers instead pick ``<function=...`` pieces out
  of a bad block, report a cut-off function as a call with the parameters seen so far, and accept
  a bare ``<function=`` with no START; none of that is done here.
* Content is all body text outside call blocks, verbatim (separating newlines and stray END
  markers included). Reasoning is split off first by :mod:`replay.parsers._reasoning` with the
  family's tags (honouring ``reasoning_open``), so a call inside the reasoning is reasoning.

Streaming: the reasoning splitter first, then the engine of
:class:`~replay.parsers._family.GrammarParser` over the same grammar: content is emitted as soon
as it cannot be the start of START; a block is read again when END arrives (searched only in new
text) or at ``finish()``, and its call sent in one tool-call delta, the name once and the
arguments exactly as the whole-text parse gives them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from replay.parsers._family import GrammarParser
from replay.parsers._jsonscan import TOO_DEEP, dumps_arguments
from replay.parsers._reasoning import THINK
from replay.parsers._schema import convert_value, declared_types
from replay.parsers.base import ToolCall

FUNC = "<function="
FUNC_END = "</function>"
PARAM = "<parameter="
PARAM_END = "</parameter>"
TERMINATORS = (PARAM_END, PARAM, FUNC_END)
_TERM_MAX = max(len(t) for t in TERMINATORS)
_WS = " \t\n\r"


def _skip_ws(text: str, pos: int, lim: int) -> int:
    """First index in ``[pos, lim)`` that is not ws, or ``lim``."""
    while pos < lim and text[pos] in _WS:
        pos += 1
    return pos


def strip_one_newline(value: str) -> str:
    """``value`` without one leading and one trailing ``\\n`` (each removed at most once)."""
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def arguments_json(name: str, params: list[tuple[str, str]], declared: dict[str, dict[str, str]]) -> str | None:
    """The call's arguments text: ``params`` (``(key, raw value)`` in order of appearance) with
    one newline stripped on each side, typed by ``declared`` (from
    :func:`~replay.parsers._schema.declared_types`) for tool ``name``, dumped with
    ``json.dumps(ensure_ascii=False)``; None when a value is nested too deeply (no call)."""
    types = declared.get(name, {})
    args: dict[str, Any] = {}
    for key, raw in params:
        value = convert_value(strip_one_newline(raw), types.get(key))
        if value is TOO_DEEP:
            return None
        args[key] = value
    return dumps_arguments(args)


# ------------------------------------------------------------------------- whole-text parse
class _NextOf:
    """Cached next occurrence (chars) of each terminator in ``text[:lim]`` at or after a position
    that only moves forward, so a block with many parameters is scanned once per terminator."""

    def __init__(self, text: str, lim: int) -> None:
        self.text, self.lim = text, lim
        self.at = {t: -2 for t in TERMINATORS}  # -2: not searched yet; -1: none up to lim

    def earliest(self, pos: int) -> tuple[int, str] | None:
        best: tuple[int, str] | None = None
        for t in TERMINATORS:
            at = self.at[t]
            if at != -1 and at < pos:
                at = self.at[t] = self.text.find(t, pos, self.lim)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, t)
        return best


def read_block(text: str, pos: int, lim: int) -> tuple[str, list[tuple[str, str]]] | None:
    """Whole-text reading of one block body ``text[pos:lim]`` (just after START, up to END or the
    end of the text): ``(name, [(key, raw value), ...])`` when it has the module's call shape,
    else None."""
    i = _skip_ws(text, pos, lim)
    if not text.startswith(FUNC, i, lim):
        return None
    i += len(FUNC)
    g = text.find(">", i, lim)
    if g < 0 or g == i or "<" in text[i:g]:
        return None
    name = text[i:g]
    params: list[tuple[str, str]] = []
    nxt = _NextOf(text, lim)
    i = g + 1
    while True:
        i = _skip_ws(text, i, lim)
        if text.startswith(PARAM, i, lim):
            i += len(PARAM)
            g = text.find(">", i, lim)
            if g < 0 or "<" in text[i:g]:
                return None
            key = text[i:g]
            found = nxt.earliest(g + 1)
            if found is None:
                return None
            t, which = found
            params.append((key, text[g + 1 : t]))
            i = t + len(PARAM_END) if which == PARAM_END else t
        elif text.startswith(FUNC_END, i, lim):
            return (name, params) if _skip_ws(text, i + len(FUNC_END), lim) == lim else None
        else:
            return None


def read_call_block(
    text: str, s: int, mark: str, end: str, declared: dict[str, dict[str, str]], final: bool = True
) -> tuple[int, list[ToolCall] | None] | None:
    """The grammar: the block at ``text[s]`` (START ``mark``) up to the first ``end`` (END) or
    the end of the text -> ``(stop, [call] or None)``; None on a stream's prefix without END (the
    block is undecided until END or the end of the stream)."""
    body = s + len(mark)
    e = text.find(end, body)
    if e < 0 and not final:
        return None
    lim, stop = (len(text), len(text)) if e < 0 else (e, e + len(end))
    block = read_block(text, body, lim)
    args = None if block is None else arguments_json(block[0], block[1], declared)
    return stop, None if block is None or args is None else [ToolCall(block[0], args)]


class XmlCallParser(GrammarParser):
    """Base of the ``<function=..><parameter=..>`` families: whole-text parse and streaming.

    Subclasses set ``name``, ``markers``, ``covers``, ``START``/``END`` (the block tags),
    ``STARTS = (START,)``, ``WAKE = (END,)`` and ``THINK`` (the reasoning start/end tags). ``tools``: the request's OpenAI tool declarations,
    used to type parameter values. ``reasoning_open``: the generation prompt already opened the
    reasoning section.
    """

    name: ClassVar[str] = ""
    markers: ClassVar[tuple[str, ...]] = ()
    covers: ClassVar[str] = ""
    START: ClassVar[str] = ""
    END: ClassVar[str] = ""
    THINK: ClassVar[tuple[str, str]] = THINK

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        self._declared = declared_types(tools)
        self.reasoning_open = reasoning_open
        super().__init__(tools, reasoning_open=reasoning_open)

    def read(self, text: str, s: int, mark: str, final: bool) -> tuple[int, list[ToolCall] | None] | None:
        return read_call_block(text, s, mark, self.END, self._declared, final)
