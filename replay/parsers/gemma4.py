"""Gemma 4 tool calls: ``<|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>``.

Output syntax (tool-call-formats.md §11; vLLM ``vllm/tool_parsers/gemma4_tool_parser.py``): a call
is ``<|tool_call>`` ``call:`` NAME ``{`` ARGS ``}`` ``<tool_call|>``; several calls are concatenated.
ARGS is Gemma's own notation, not JSON: ``key:value`` pairs separated by ``,``, keys unquoted (or
wrapped in ``<|"|>``); string values wrapped in the single token ``<|"|>`` on both sides, with no
escaping; nested objects ``{k:v,...}``, arrays ``[v,...]``; other values bare (numbers,
``true``/``false``, ``null``/``none``/``nil``). Reasoning is a channel section
``<|channel>thought\\n...<channel|>``. After its calls the model may write ``<|tool_response>`` (a
stop marker); ``<turn|>`` ends the model's turn.

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

* A block starts at ``<|tool_call>``. It is a call when it reads ``call:``, a non-empty NAME of
  characters that are alphanumeric or ``_ - .`` (vLLM's ``[\\w\\-\\.]+``), ``{``, an ARGS object by
  the grammar below, the matching ``}``, then JSON whitespace and ``<tool_call|>`` — or JSON
  whitespace up to the end of the text (the stream stopped right after the call; vLLM's regex
  would need the end marker). Arguments are ``json.dumps(obj, ensure_ascii=False)``.
* ARGS grammar (as vLLM's ``_parse_gemma4_args``, but strict): inside ``{}``/``[]`` items are
  separated by any run of whitespace and commas (vLLM skips them the same way). A key is
  ``<|"|>...<|"|>`` (unwrapped) or a bare run of characters other than ``: , { } [ ] <``,
  stripped, non-empty, followed by ``:``. A value is ``<|"|>...<|"|>`` (the text up to the next
  ``<|"|>``, verbatim: a ``}<tool_call|>`` inside a string does not end the call, where vLLM's
  non-greedy regex cuts there), ``{...}``, ``[...]``, or a bare run up to the next ``,`` ``}``
  ``]`` that is non-empty when stripped and contains none of ``{ [ <``. A bare value becomes
  ``true``/``false``; ``null``/``none``/``nil`` (any case) -> null; with a ``.``: a finite
  ``float``, else an ``int`` when it reads as one, else the stripped text (vLLM's rule, plus the
  finiteness check). Duplicate keys: the last wins. Schema typing does not apply: the notation
  carries the types (a string is always delimited). ARGS nested deeper than
  :data:`~replay.parsers._jsonscan.MAX_DEPTH` (ARGS itself is depth 1) is malformed.
* A block that is not a call is content, verbatim (markers included), and parsing goes on after
  it. Its extent: when ``call:NAME{ARGS}`` is complete, up to the first ``<tool_call|>`` after its
  ``}``; otherwise (malformed, or cut off by the end of the text) up to the first ``<tool_call|>``
  after the start marker; either way to the end of the text when there is none. (vLLM turns the
  whole output into content on any error.)
* Reasoning: ``<|channel>`` outside a call opens a reasoning section, anywhere (the interleaved
  template lets the model think between calls); it ends at the next ``<channel|>`` (dropped), or
  at the end of the text. The section's text is reasoning, verbatim, except that a leading channel
  name ``thought`` and one newline after it are removed. ``reasoning_open=True``: the output starts
  inside a section (the prompt opened it), whose text is kept whole.
* Framing dropped from content: stray ``<channel|>``, ``<|tool_response>``, ``<turn|>``. Everything
  else outside calls and reasoning, including a stray ``<tool_call|>`` or ``<|"|>``, is content,
  verbatim (vLLM strips the content before the first call and drops text after calls).

The grammar (:func:`read_block`, one function for both paths, on the engine of
:class:`~replay.parsers._family.GrammarParser`): text outside blocks is content, streamed as soon
as it cannot be the start of a marker acted upon; ``<|channel>`` and the ``thought`` head are a
block that opens a reasoning region (streamed as it arrives up to ``<channel|>``); a call block
is read again each time a ``<tool_call|>`` arrives (every decision before the end of the text needs
one), and its call is sent in one tool-call delta (name once, arguments exactly the whole-text
string), or its text is content.

End tokens ``<turn|>`` and ``<eos>`` (``end_tokens``) are removed from the raw text in both paths.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from replay.parsers._family import REASONING, EveryDelta, GrammarParser, MarkerWake, Region
from replay.parsers._jsonscan import MAX_DEPTH, dumps_arguments, skip_ws
from replay.parsers.base import ToolCall

START = "<|tool_call>"
END = "<tool_call|>"
STR = '<|"|>'
CH_START = "<|channel>"
CH_END = "<channel|>"
TOOL_RESPONSE = "<|tool_response>"
TURN_END = "<turn|>"

MARKERS = (START, END, STR, CH_START, CH_END, TOOL_RESPONSE, TURN_END)
OUTSIDE = (START, CH_START, CH_END, TOOL_RESPONSE, TURN_END)  # markers acted upon outside calls
DROPPED = (CH_END, TOOL_RESPONSE, TURN_END)
CALL_WORD = "call:"
THOUGHT = "thought"
_HEAD = len(THOUGHT) + 1
_KEY_STOP = frozenset(":,{}[]<")
_BARE_STOP = frozenset(",}]")
_BARE_BAD = frozenset("{[<")
_SEP = frozenset(" \t\n\r,")
#: the pseudo-mark of a reasoning section's region (after ``<|channel>`` and its head)
SECTION = "\x00section"


def is_name_char(c: str) -> bool:
    """True for a function-name character: alphanumeric, ``_``, ``-`` or ``.``."""
    return c.isalnum() or c in "_-."


def bare_value(raw: str) -> Any:
    """The JSON value of a bare ARGS value's text (module rule; vLLM ``_parse_gemma4_value``)."""
    s = raw.strip()
    if s == "true":
        return True
    if s == "false":
        return False
    if s.lower() in ("null", "none", "nil"):
        return None
    try:
        if "." in s:
            f = float(s)
            return f if math.isfinite(f) else s
        return int(s)
    except ValueError:
        return s


def thought_prefix_len(section: str) -> int:
    """Chars to drop at the start of a reasoning section: ``thought`` and one newline after it."""
    if not section.startswith(THOUGHT):
        return 0
    return len(THOUGHT) + (1 if section[len(THOUGHT) : len(THOUGHT) + 1] == "\n" else 0)


class _Bad(Exception):
    """:func:`parse_call_head`: the text is not a complete ``call:NAME{ARGS}``."""


class _Cut(_Bad):
    """:func:`parse_call_head`: the text ends before ``call:NAME{ARGS}`` does (or inside a token
    such as ``<|"|>``): on a stream's prefix, more text could complete it."""


def _cut_at(text: str, i: int, token: str) -> bool:
    """True when ``text[i:]`` is a proper prefix of ``token`` (the text may go on into it)."""
    return len(text) - i < len(token) and token.startswith(text[i:])


def parse_call_head(text: str, pos: int) -> tuple[str, dict[str, Any], int]:
    """Parse ``call:NAME{ARGS}`` at ``pos`` (just after ``<|tool_call>``), by the module's grammar.

    Returns ``(name, arguments, k)`` with ``k`` the index just after the closing ``}`` (chars);
    raises :class:`_Cut` when the text ends before the head does (a prefix that more text could
    complete), :class:`_Bad` when it is malformed whatever follows.
    """
    n = len(text)
    if not text.startswith(CALL_WORD, pos):
        raise _Cut if _cut_at(text, pos, CALL_WORD) else _Bad
    i = pos + len(CALL_WORD)
    j = i
    while j < n and is_name_char(text[j]):
        j += 1
    if j >= n:
        raise _Cut
    if j == i or text[j] != "{":
        raise _Bad
    name = text[i:j]
    root: dict[str, Any] = {}
    # explicit stack of [container, pending key]
    stack: list[list[Any]] = [[root, None]]
    i = j + 1
    while True:
        top = stack[-1]
        cont = top[0]
        while i < n and text[i] in _SEP:
            i += 1
        if i >= n:
            raise _Cut
        c = text[i]
        closed = None
        if isinstance(cont, dict) and top[1] is None:
            if c == "}":
                closed = cont
            else:
                if text.startswith(STR, i):
                    e = text.find(STR, i + len(STR))
                    if e < 0:
                        raise _Cut
                    key = text[i + len(STR) : e]
                    i = e + len(STR)
                elif c == "<" and _cut_at(text, i, STR):
                    raise _Cut
                else:
                    e = i
                    while e < n and text[e] not in _KEY_STOP:
                        e += 1
                    if e >= n:
                        raise _Cut
                    key = text[i:e].strip()
                    if not key:
                        raise _Bad
                    i = e
                if i >= n:
                    raise _Cut
                if text[i] != ":":
                    raise _Bad
                top[1] = key
                i += 1
                while i < n and text[i] in " \t\n\r":
                    i += 1
                if i >= n:
                    raise _Cut
                c = text[i]
        elif isinstance(cont, list) and c == "]":
            closed = cont
        if closed is not None:
            i += 1
            stack.pop()
            if not stack:
                return name, root, i
            top = stack[-1]
            _attach(top, closed)
        elif text.startswith(STR, i):  # a value at i
            e = text.find(STR, i + len(STR))
            if e < 0:
                raise _Cut
            _attach(top, text[i + len(STR) : e])
            i = e + len(STR)
        elif c == "<" and _cut_at(text, i, STR):
            raise _Cut
        elif c in "{[":
            if len(stack) >= MAX_DEPTH:
                raise _Bad
            stack.append([{} if c == "{" else [], None])
            i += 1
            continue
        else:
            e = i
            while e < n and text[e] not in _BARE_STOP:
                if text[e] in _BARE_BAD:
                    raise _Bad
                e += 1
            if e >= n:
                raise _Cut
            if not text[i:e].strip():
                raise _Bad
            _attach(top, bare_value(text[i:e]))
            i = e
        # after a value: whitespace, then "," or the container's close
        while i < n and text[i] in " \t\n\r":
            i += 1
        if i >= n:
            raise _Cut
        closer = "}" if isinstance(top[0], dict) else "]"
        if text[i] != "," and text[i] != closer:
            raise _Bad


def _attach(frame: list[Any], value: Any) -> None:
    """Put ``value`` in the container of ``frame`` (under its pending key for an object)."""
    cont = frame[0]
    if isinstance(cont, dict):
        cont[frame[1]] = value
        frame[1] = None
    else:
        cont.append(value)


def read_block(text: str, s: int, mark: str, final: bool = True) -> tuple[int, list[ToolCall] | None] | tuple[int, list[ToolCall] | None, str] | None:
    """The grammar (:data:`~replay.parsers._family.Grammar`) of the block at ``text[s]``, opened
    by ``mark`` (one of :data:`OUTSIDE`): ``(end, calls or None[, what follows])``; None on a
    stream's prefix that cannot decide it yet.

    * ``<channel|>``, ``<|tool_response>``, ``<turn|>``: framing, dropped;
    * ``<|channel>``: framing with the section's ``thought`` head (:func:`thought_prefix_len`,
      decided by its first 8 chars or the section's end), followed by the reasoning region;
    * ``<|tool_call>``: a call when ``call:NAME{ARGS}`` (:func:`parse_call_head`) is followed by
      whitespace and ``<tool_call|>`` or the end of the text; else content verbatim up to the first
      ``<tool_call|>`` after the head's ``}`` (after the marker when the head is malformed or cut
      off), or to the end of the text.
    """
    n = len(text)
    p = s + len(mark)
    if mark != START:
        if mark != CH_START:
            return p, []
        e = text.find(CH_END, p, p + _HEAD + len(CH_END))
        if e < 0 and n - p < _HEAD and not final:
            return None
        return p + thought_prefix_len(text[p : min(p + _HEAD, n if e < 0 else e)]), [], SECTION
    seek = p
    try:
        name, args, k = parse_call_head(text, p)
    except _Cut:
        if not final:
            return None
    except _Bad:
        pass
    else:
        m = skip_ws(text, k)
        if text.startswith(END, m):
            return m + len(END), [ToolCall(name, dumps_arguments(args))]
        if m == n:
            return (n, [ToolCall(name, dumps_arguments(args))]) if final else None
        if not final and _cut_at(text, m, END):
            return None
        seek = k
    e = text.find(END, seek)
    if e < 0:
        return (n, None) if final else None
    return e + len(END), None


class Gemma4Parser(GrammarParser):
    """Tool parser for Google Gemma 4 (``<|tool_call>call:NAME{...}<tool_call|>``, ``<|"|>`` strings).

    Mirrors vLLM ``Gemma4ToolParser`` (``--tool-call-parser gemma4``) in syntax and value
    conversion; the grammar is strict and string-aware where vLLM's regex is not, and the rules
    for malformed output are this module's (module docstring). Reads its own ``<|channel>...
    <channel|>`` reasoning sections (not ``<think>``), anywhere outside calls. ``tools`` is
    accepted and ignored (values are typed by the notation). ``reasoning_open``: the output starts
    inside a section, whose text is kept whole.
    """

    name: ClassVar[str] = "gemma4"
    covers: ClassVar[str] = "Google Gemma 4 (gemma-4-*-it, incl. the interleaved-thinking template): <|tool_call>call:NAME{...}<tool_call|>"
    markers: ClassVar[tuple[str, ...]] = MARKERS
    call_starts: ClassVar[tuple[str, ...]] = (START,)  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = (TURN_END, "<eos>")
    STARTS = OUTSIDE
    WAKE = (END,)
    REGIONS: ClassVar[dict[str, Region]] = {SECTION: (REASONING, (CH_END,))}

    def first(self) -> str:
        return SECTION if self._reasoning_open else ""

    read = staticmethod(read_block)  # the grammar (:data:`~replay.parsers._family.Grammar`)

    def wake(self, mark: str) -> MarkerWake:
        """A section's head is decided by its length (read on every delta); a call block and the
        framing markers as :meth:`GrammarParser.wake` (a call waits for ``<tool_call|>``)."""
        return EveryDelta() if mark == CH_START else super().wake(mark)
