"""The shared ``<function=NAME><parameter=KEY>VALUE</parameter></function>`` call grammar.

Used by Qwen3-Coder (``<tool_call>`` ... ``</tool_call>``, :mod:`replay.parsers.qwen3_coder`) and
Seed-OSS (``<seed:tool_call>`` ... ``</seed:tool_call>``, :mod:`replay.parsers.seed_oss`); the
family modules only set the block and reasoning tags. This module holds the format rules, the
whole-text parse, the incremental block scanner of the streaming side, and the parser class both
families derive from.

Block grammar (ws = space, tab, LF, CR; all positions and lengths in chars)::

    START ws* "<function=" NAME ">" ( ws* PARAM )* ws* "</function>" ws* END
    PARAM = "<parameter=" KEY ">" VALUE [ "</parameter>" ]

Reference rules (this module's definition; the whole-text parse and the streaming parser
implement them separately and the tests check that they agree under every chunking):

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

Streaming: the reasoning splitter first, then a buffered state machine on the body. Outside a
block it emits content as soon as it cannot be the start of START (a suffix that is a proper
prefix of START is held back). Inside a block it searches END only in new text and advances a
structural scanner (:class:`BlockScan`) over new text only, so each delta costs time linear in
its length (plus a marker length). The block is decided when END is seen or at ``finish()``; a
call is then sent in one tool-call delta, the name once and the arguments exactly as the
whole-text parse gives them.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from replay.parsers._family import StreamParser, parse_blocks
from replay.parsers._jsonscan import TOO_DEEP
from replay.parsers._markers import find_marker
from replay.parsers._reasoning import THINK, ReasoningSplitter, split_reasoning
from replay.parsers._schema import convert_value, declared_types
from replay.parsers.base import ParseResult, StreamDelta, ToolCall

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
    return json.dumps(args, ensure_ascii=False)


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


def parse_body(text: str, start: str, end: str, declared: dict[str, dict[str, str]]) -> tuple[str, list[ToolCall]]:
    """Whole-text parse of a body (reasoning already split off): ``(content, calls)``."""

    def read(text: str, s: int, mark: str) -> tuple[int, list[ToolCall] | None]:
        body = s + len(mark)
        e = text.find(end, body)
        lim, stop = (len(text), len(text)) if e < 0 else (e, e + len(end))
        block = read_block(text, body, lim)
        args = None if block is None else arguments_json(block[0], block[1], declared)
        return stop, None if block is None or args is None else [ToolCall(block[0], args)]

    return parse_blocks(text, (start,), read)


# ------------------------------------------------------------------------- streaming
_PRE, _NAME, _PWS, _KEY, _VALUE, _POST, _OK, _BAD = range(8)
WAIT, OK, BAD = "wait", "ok", "bad"


class BlockScan:
    """Incremental decision on one block, for the streaming side.

    Takes ``end`` (the END marker) and ``body_start`` (index in chars in the parser's buffer just
    after START). The parser calls :meth:`advance` with its growing buffer (only appended to
    while the block is open) and ``final`` (end of stream). It returns None while undecided,
    else ``(stop, block)``: ``stop`` the index just after the block (after END, or ``len(buf)``
    at ``final`` without END) and ``block`` ``(name, [(key, raw value), ...])`` when the block is
    a call, else None. END is searched only in new text; the structure is scanned state by state
    over new text only. Must not be called again once it has decided.
    """

    def __init__(self, end: str, body_start: int) -> None:
        self.end = end
        self._eseek = body_start  # END is not in buf[body_start : _eseek + len(end) - 1]
        self._e = -1  # index of END once found
        self._st = _PRE
        self._pos = body_start  # structural cursor
        self._scan = body_start  # NAME/KEY: '>' and '<' not in buf[_pos:_scan]
        self._tseek = 0  # VALUE: no terminator starts in buf[_vstart:_tseek]
        self._vstart = 0
        self._name = ""
        self._key = ""
        self._params: list[tuple[str, str]] = []

    def advance(self, buf: str, final: bool) -> tuple[int, tuple[str, list[tuple[str, str]]] | None] | None:
        """Move on over ``buf``; None while undecided, else ``(stop, block or None)``."""
        if self._e < 0:
            e = buf.find(self.end, self._eseek)
            if e >= 0:
                self._e = e
            else:
                self._eseek = max(self._eseek, len(buf) - len(self.end) + 1)
        known = self._e >= 0
        lim = self._e if known else len(buf)
        verdict = self._structure(buf, lim, known or final)
        if not (known or final):
            return None
        assert verdict != WAIT
        stop = self._e + len(self.end) if known else len(buf)
        return stop, ((self._name, self._params) if verdict == OK else None)

    def _wait_or_bad(self, buf: str, i: int, lim: int, complete: bool, markers: tuple[str, ...]) -> str:
        """At ``i`` none of ``markers`` starts: wait when the rest may still become one."""
        if not complete and lim - i < max(len(m) for m in markers):
            rest = buf[i:lim]
            if any(m.startswith(rest) for m in markers):
                return WAIT
        self._st = _BAD
        return BAD

    def _structure(self, buf: str, lim: int, complete: bool) -> str:
        while True:
            st = self._st
            if st == _BAD:
                return BAD
            if st == _OK:
                return OK
            if st in (_PRE, _PWS, _POST):
                i = self._pos = _skip_ws(buf, self._pos, lim)
                if i == lim:
                    if not complete:
                        return WAIT
                    self._st = _OK if st == _POST else _BAD
                    continue
                if st == _POST:  # only END may follow; it lies at or beyond lim when known
                    return self._wait_or_bad(buf, i, lim, complete, (self.end,))
                if st == _PRE:
                    if buf.startswith(FUNC, i, lim):
                        self._pos = self._scan = i + len(FUNC)
                        self._st = _NAME
                        continue
                    return self._wait_or_bad(buf, i, lim, complete, (FUNC,))
                if buf.startswith(PARAM, i, lim):
                    self._pos = self._scan = i + len(PARAM)
                    self._st = _KEY
                    continue
                if buf.startswith(FUNC_END, i, lim):
                    self._pos = i + len(FUNC_END)
                    self._st = _POST
                    continue
                return self._wait_or_bad(buf, i, lim, complete, (PARAM, FUNC_END))
            if st in (_NAME, _KEY):
                g = buf.find(">", self._scan, lim)
                if buf.find("<", self._scan, lim if g < 0 else g) >= 0:
                    self._st = _BAD
                    continue
                if g < 0:
                    self._scan = lim
                    if not complete:
                        return WAIT
                    self._st = _BAD
                    continue
                text = buf[self._pos : g]
                if st == _NAME:
                    if not text:
                        self._st = _BAD
                        continue
                    self._name = text
                    self._pos = g + 1
                    self._st = _PWS
                else:
                    self._key = text
                    self._vstart = self._tseek = g + 1
                    self._st = _VALUE
                continue
            # _VALUE: the earliest terminator at or after _tseek that ends by lim
            best = -1
            which = ""
            for t in TERMINATORS:
                at = buf.find(t, self._tseek, lim)
                if at >= 0 and (best < 0 or at < best):
                    best, which = at, t
            if best < 0:
                if complete:
                    self._st = _BAD
                    continue
                self._tseek = max(self._tseek, lim - _TERM_MAX + 1)
                return WAIT
            self._params.append((self._key, buf[self._vstart : best]))
            self._pos = best + len(PARAM_END) if which == PARAM_END else best
            self._st = _PWS


class XmlCallParser(StreamParser):
    """Base of the ``<function=..><parameter=..>`` families: whole-text parse and streaming.

    Subclasses set ``name``, ``markers``, ``covers``, ``START``/``END`` (the block tags) and
    ``THINK`` (the reasoning start/end tags). ``tools``: the request's OpenAI tool declarations,
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
        super().__init__(tools, ReasoningSplitter(self.THINK, open=reasoning_open))
        self.reasoning_open = reasoning_open
        self._declared = declared_types(tools)
        self._block: BlockScan | None = None

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion) -> content, calls and reasoning, per the
        rules of :mod:`replay.parsers._xmlcall`."""
        text = self.strip_end_tokens(text)
        reasoning, body = split_reasoning(text, self.THINK, open=self.reasoning_open)
        content, calls = parse_body(body, self.START, self.END, self._declared)
        return ParseResult(content=content, calls=tuple(calls), reasoning=reasoning)

    # ---------------------------------------------------------------- streaming
    def _drain(self, final: bool) -> StreamDelta:
        out = StreamDelta()
        parts: list[str] = []
        while True:
            if self._block is None:
                i, mark = find_marker(self._buf, (self.START,), final)
                parts.append(self._buf[:i])
                self._buf = self._buf[i:]
                if not mark:
                    break
                self._block = BlockScan(self.END, len(self.START))
            decided = self._block.advance(self._buf, final)
            if decided is None:
                break
            stop, block = decided
            args = None if block is None else arguments_json(block[0], block[1], self._declared)
            if block is None or args is None:
                parts.append(self._buf[:stop])
            else:
                self._send(out, block[0], args, self._buf[:stop])
            self._buf = self._buf[stop:]
            self._block = None
        out.content = "".join(parts)
        return out
