"""Pythonic tool calls (Llama 3.2 / Llama 4 pythonic, LFM2 / LFM2.5): ``[f(a=1, b="x"), g()]``.

Output syntax (tool-call-formats.md §15): a Python list literal of keyword-argument calls,
``[get_weather(city="Paris", days=3), get_time()]``; values are Python literals. Llama 3.2 / 4
write the list bare as the whole reply (Llama 4 may wrap it in ``<|python_start|>`` ...
``<|python_end|>``); LFM2 / LFM2.5 wrap it in ``<|tool_call_start|>`` ... ``<|tool_call_end|>``
after optional prose, and may reason first in ``<think>...</think>``.

Checked against public implementations (facts only): vLLM ``PythonicToolParser`` requires the list
at position 0 of the output, ``ast.parse``s it, accepts constants, lists and constant-keyed dicts
as values, ignores positional arguments, and returns the whole output as content on any error.
SGLang ``PythonicDetector`` also accepts dotted names; SGLang ``Lfm2Detector`` takes each
``<|tool_call_start|>(.*?)<|tool_call_end|>`` block (not string-aware), accepts a bare call or a
list, a JSON ``[{"name":..., "arguments":...}]`` list too, converts tuples to arrays, and dumps
arguments with ``ensure_ascii=False``; llama.cpp also reads JSON-style ``true``/``false``/``null``
inside the Python literals (its test corpus expects it).

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

* Reasoning: a leading ``<think>...</think>`` is split off first (:mod:`replay.parsers._reasoning`,
  ``reasoning_open`` honoured); the rules below apply to the rest (the body).
* A **call list** is ``[`` CALL (``,`` CALL)* [``,``] ``]`` with Python whitespace (space, tab,
  CR, LF) between tokens. CALL is ``NAME(KW=VALUE, ...)`` with an optional trailing comma; NAME is
  an identifier or a dotted path of identifiers (``Calendar.create_event``); keywords must be
  distinct; positional arguments make the list invalid (vLLM drops them silently). VALUE is a
  Python literal: a string in ``'`` or ``"`` (no prefixes, no triple quotes, no raw newline; the
  escapes are Python's, decoded with ``ast.literal_eval`` of the string token), a number (int or
  finite float, optionally signed; ``ast.literal_eval`` of the token), ``True False None`` and the
  JSON spellings ``true false null``, a list, a tuple (an array), a dict with string keys. The
  empty list is not a call list. Arguments are ``json.dumps(kwargs, ensure_ascii=False)``
  (``{}`` for ``f()``). A value nested deeper than :data:`~replay.parsers._jsonscan.MAX_DEPTH`
  (brackets of lists, tuples, dicts and parentheses counted) makes the list invalid.
* A **bare** call list is tried only at the start of the body (after leading whitespace, which
  stays content). When valid, its calls are taken and the text after its ``]`` is read as prose;
  when not, the body is read as prose from the ``[``.
* A **wrapped** block starts at ``<|tool_call_start|>`` (ends with ``<|tool_call_end|>``) or
  ``<|python_start|>`` (ends with ``<|python_end|>``) anywhere in prose. It is a call block when
  whitespace, a valid call list, whitespace and then its end marker follow the start marker, or
  whitespace up to the end of the stream (an unterminated last block whose list is complete): the
  markers and the whitespace are dropped. Otherwise the block is content, verbatim, markers
  included, up to and including the first end marker after the start marker (not string-aware:
  SGLang's extent), or to the end of the text when there is none; prose resumes after it.
* Prose is content, verbatim. ``<|tool_call_end|>`` / ``<|python_end|>`` outside a block are
  content. A list cut off by the end of the stream is not a call (its text is content).

The extent of a list is found by bracket matching that skips strings (the recursive-descent
literal parser, :func:`parse_call_list`; on a stream's prefix :class:`ListScan` first tells a list
cut off by the prefix from a bad one).

Streaming: the engine of :class:`~replay.parsers._family.GrammarParser` over the same grammar
(:meth:`PythonicParser.read`): the bare list is its :data:`~replay.parsers._family.HEAD` block,
read when its ``]`` arrives (scanned once, incrementally); a wrapped block is read when its end
marker arrives; prose is emitted as soon as it cannot be the start of a start marker. A decided
block's calls are sent one tool-call delta each (name once, arguments exactly the whole-text
parse's string). A bare list that is still open holds back all text after it (e.g. prose starting
with ``[`` and an apostrophe, until a newline ends the would-be string). ``finish()`` reports a
complete unterminated block's calls.

Choices where the upstream suites differ (tests/conformance, ``KNOWN`` in tests/test_conformance.py):

* SGLang's ``PythonicDetector`` takes a bare ``[call(...)]`` list anywhere after prose (and
  several lists with text between); vLLM takes a bare list only at position 0; replay follows
  vLLM, because prose often holds bracketed text that parses as a call list.
* SGLang's ``Lfm2Detector`` also reads JSON calls (``[{"name", "arguments"}]`` or a bare object)
  between ``<|tool_call_start|>`` and ``<|tool_call_end|>``; replay reads the Pythonic list LFM2's
  chat template asks for; a JSON block there is content.
* Calls to undeclared tools: SGLang skips them (``SGLANG_FORWARD_UNKNOWN_TOOLS`` off); replay
  reports them.
* Escapes in Python string literals are decoded as ``ast.literal_eval`` does (vLLM, SGLang);
  llama.cpp's test keeps ``\\n`` as two characters.
* End tokens (Llama ``<|eot_id|>``, ``<|eom_id|>``, ``<|eot|>``, ``<|eom|>``, ``<|end_of_text|>``;
  LFM2 ``<|im_end|>``, ``<|endoftext|>``) are removed from the raw text in both paths.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from typing import Any, ClassVar

from replay.parsers._family import HEAD, GrammarParser, MarkerWake, ValueEndWake
from replay.parsers._jsonscan import MAX_DEPTH, dumps_arguments
from replay.parsers._reasoning import THINK
from replay.parsers.base import ToolCall

TC_START = "<|tool_call_start|>"
TC_END = "<|tool_call_end|>"
PY_START = "<|python_start|>"
PY_END = "<|python_end|>"
WRAPS = {TC_START: TC_END, PY_START: PY_END}
STARTS = (TC_START, PY_START)

_WS = " \t\r\n"
_NAME = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
_IDENT = re.compile(r"[^\W\d]\w*")
_NUMBER = re.compile(r"[-+]?(?:\d|\.\d)(?:[\w.]|(?<=[eE])[-+])*")
_STR_RUN = {'"': re.compile(r'[^"\\\r\n]*'), "'": re.compile(r"[^'\\\r\n]*")}
_CONSTS = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
_CLOSE = {"(": ")", "[": "]", "{": "}"}


def skip_py_ws(text: str, pos: int) -> int:
    """Index of the first character at or after ``pos`` that is not space, tab, CR or LF."""
    n = len(text)
    while pos < n and text[pos] in _WS:
        pos += 1
    return pos


class _Invalid(Exception):
    """Internal: the text is not a valid call list."""


def _string_end(text: str, i: int) -> int:
    """Index just after the string literal whose quote is at ``text[i]``; raises :class:`_Invalid`
    at a raw CR/LF or the end of the text."""
    q = text[i]
    run = _STR_RUN[q]
    n = len(text)
    p = i + 1
    while True:
        p = run.match(text, p).end()
        if p >= n:
            raise _Invalid
        c = text[p]
        if c == q:
            return p + 1
        if c == "\\":
            if p + 1 >= n:
                raise _Invalid
            p += 2
            continue
        raise _Invalid  # raw newline


def _literal(token: str) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.literal_eval(token)
    except (ValueError, SyntaxError, TypeError, MemoryError, OverflowError) as exc:
        raise _Invalid from exc


class _Reader:
    """Recursive-descent reader of the call-list grammar over ``text`` (whole-text path).

    ``depth`` is the number of brackets open inside the argument value being read; a value that
    opens more than :data:`~replay.parsers._jsonscan.MAX_DEPTH` is invalid, so the recursion is
    bounded whatever the input."""

    def __init__(self, text: str) -> None:
        self.t = text
        self.n = len(text)

    def ws(self, p: int) -> int:
        return skip_py_ws(self.t, p)

    def expect(self, p: int, ch: str) -> int:
        if p >= self.n or self.t[p] != ch:
            raise _Invalid
        return p + 1

    def call_list(self, p: int) -> tuple[list[tuple[str, str, str]], int]:
        p = self.ws(self.expect(p, "["))
        calls: list[tuple[str, str, str]] = []
        while True:
            if p < self.n and self.t[p] == "]" :
                if not calls:
                    raise _Invalid
                return calls, p + 1
            call, p = self.call(p)
            calls.append(call)
            p = self.ws(p)
            if p < self.n and self.t[p] == ",":
                p = self.ws(p + 1)
            elif p >= self.n or self.t[p] != "]":
                raise _Invalid

    def call(self, p: int) -> tuple[tuple[str, str, str], int]:
        m = _NAME.match(self.t, p)
        if not m:
            raise _Invalid
        name = m.group()
        p = self.expect(self.ws(m.end()), "(")
        open_at = p
        p = self.ws(p)
        kwargs: dict[str, Any] = {}
        while True:
            if p < self.n and self.t[p] == ")":
                raw = self.t[open_at:p]
                return (name, dumps_arguments(kwargs), raw), p + 1
            m = _IDENT.match(self.t, p)
            if not m or m.group() in kwargs:
                raise _Invalid
            key = m.group()
            p = self.expect(self.ws(m.end()), "=")
            if p < self.n and self.t[p] == "=":  # "==" is a comparison, not a keyword
                raise _Invalid
            kwargs[key], p = self.value(self.ws(p), 0)
            p = self.ws(p)
            if p < self.n and self.t[p] == ",":
                p = self.ws(p + 1)
            elif p >= self.n or self.t[p] != ")":
                raise _Invalid

    def value(self, p: int, depth: int) -> tuple[Any, int]:
        if p >= self.n:
            raise _Invalid
        c = self.t[p]
        if c in "[({" and depth >= MAX_DEPTH:
            raise _Invalid
        if c in "\"'":
            end = _string_end(self.t, p)
            v = _literal(self.t[p:end])
            if not isinstance(v, str):
                raise _Invalid
            return v, end
        if c == "[":
            return self.sequence(p + 1, "]", depth + 1)
        if c == "(":
            return self.sequence(p + 1, ")", depth + 1)
        if c == "{":
            return self.mapping(p + 1, depth + 1)
        m = _NUMBER.match(self.t, p)
        if m:
            v = _literal(m.group())
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _Invalid
            if isinstance(v, float) and not math.isfinite(v):
                raise _Invalid
            return v, m.end()
        m = _IDENT.match(self.t, p)
        if m and m.group() in _CONSTS:
            return _CONSTS[m.group()], m.end()
        raise _Invalid

    def sequence(self, p: int, close: str, depth: int) -> tuple[Any, int]:
        """List (``]``) or tuple/parenthesised value (``)``) after its opening bracket."""
        items: list[Any] = []
        comma = False
        p = self.ws(p)
        while True:
            if p < self.n and self.t[p] == close:
                if close == ")" and len(items) == 1 and not comma:
                    return items[0], p + 1  # (x) is x
                return items, p + 1
            v, p = self.value(p, depth)
            items.append(v)
            p = self.ws(p)
            if p < self.n and self.t[p] == ",":
                comma = True
                p = self.ws(p + 1)
            elif p >= self.n or self.t[p] != close:
                raise _Invalid

    def mapping(self, p: int, depth: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        p = self.ws(p)
        while True:
            if p < self.n and self.t[p] == "}":
                return out, p + 1
            if p >= self.n or self.t[p] not in "\"'":
                raise _Invalid
            key, p = self.value(p, depth)
            p = self.expect(self.ws(p), ":")
            out[key], p = self.value(self.ws(p), depth)
            p = self.ws(p)
            if p < self.n and self.t[p] == ",":
                p = self.ws(p + 1)
            elif p >= self.n or self.t[p] != "}":
                raise _Invalid


def parse_call_list(text: str, i: int) -> tuple[list[tuple[str, str, str]], int] | None:
    """Read a call list starting at ``text[i] == "["``.

    Returns ``([(name, arguments JSON text, raw argument text), ...], end)`` with ``end`` the
    index (chars) just after the closing ``]``, or None when the text there is not a valid,
    non-empty call list under the module's grammar (including a value nested too deeply).
    Reads no further than the matching ``]``.
    """
    try:
        return _Reader(text).call_list(i)
    except _Invalid:
        return None


MORE, DONE, BAD = "more", "done", "bad"
_PLAIN_OUT = re.compile(r"[^()\[\]{}\"']*")


class ListScan:
    """Incremental bracket matcher for a list starting with ``[`` (the streaming path).

    ``feed(text)`` takes the next piece (the first piece starts with ``[``) and returns ``"more"``
    (still open), ``"done"`` (:attr:`end`: index just after the matching ``]``, in chars from the
    start of the first piece) or ``"bad"`` (a closing bracket that does not match, or a string
    literal with a raw CR/LF). Strings in ``'``/``"`` are skipped with backslash escapes, as the
    reader of :func:`parse_call_list` skips them, so a valid list ends where that reader ends it.
    """

    def __init__(self) -> None:
        self.status = MORE
        self.end: int | None = None
        self._base = 0
        self._stack: list[str] = []
        self._quote = ""  # the open string's quote, "" outside strings
        self._esc = False

    def feed(self, text: str) -> str:
        """Scan the next piece of text; return the status."""
        if self.status != MORE:
            return self.status
        i, n = 0, len(text)
        while i < n:
            if self._quote:
                if self._esc:
                    self._esc = False
                    i += 1
                    continue
                i = _STR_RUN[self._quote].match(text, i).end()
                if i >= n:
                    break
                c = text[i]
                if c == self._quote:
                    self._quote = ""
                elif c == "\\":
                    self._esc = True
                else:
                    self.status = BAD
                    break
                i += 1
                continue
            i = _PLAIN_OUT.match(text, i).end()
            if i >= n:
                break
            c = text[i]
            if c in "([{":
                self._stack.append(_CLOSE[c])
            elif c in ")]}":
                if not self._stack or self._stack.pop() != c:
                    self.status = BAD
                    break
                if not self._stack:
                    self.status = DONE
                    self.end = self._base + i + 1
                    break
            else:
                self._quote = c
            i += 1
        self._base += n
        return self.status


def _list_at(text: str, j: int, final: bool) -> tuple[list[tuple[str, str, str]], int] | None | bool:
    """The call list at ``text[j] == "["`` -> ``(calls, end)``, or False when it is none; None on
    a stream's prefix that cut it off (its ``]`` not in the text yet, by :class:`ListScan`)."""
    if not final and ListScan().feed(text[j:]) == MORE:
        return None
    got = parse_call_list(text, j)
    return False if got is None else got


def read_wrapped(text: str, s: int, start: str, final: bool = True) -> tuple[int, list[ToolCall] | None] | None:
    """The grammar of a wrapped block at ``s`` -> ``(end, calls or None)`` (module rules); None on
    a stream's prefix that cannot decide it yet."""
    n = len(text)
    end_marker = WRAPS[start]
    b = s + len(start)
    j = skip_py_ws(text, b)
    if j == n and not final:
        return None
    got = _list_at(text, j, final) if text.startswith("[", j) else False
    if got is None:
        return None
    if got:
        m = skip_py_ws(text, got[1])
        calls = [ToolCall(c[0], c[1]) for c in got[0]]
        if text.startswith(end_marker, m):
            return m + len(end_marker), calls
        if m == n:  # an unterminated last block whose list is complete
            return (n, calls) if final else None
        if not final and end_marker.startswith(text[m:]):
            return None
    e = text.find(end_marker, b)
    if e < 0:
        return (n, None) if final else None
    return e + len(end_marker), None


class PythonicParser(GrammarParser):
    """Tool parser for pythonic tool calls: Llama 3.2 / Llama 4 bare lists and LFM2's wrapped lists.

    Mirrors vLLM ``PythonicToolParser`` / ``Llama4PythonicToolParser`` and SGLang
    ``PythonicDetector`` / ``Lfm2Detector`` in syntax. Deliberate differences (module docstring):
    values are read by a grammar of Python literals (never ``eval``; ``true/false/null`` accepted
    as llama.cpp does), positional arguments make a list invalid instead of being dropped, a failed
    list is content without spoiling the rest of the output, text after a bare list is content,
    a wrapped block's list must be a list (SGLang also takes a bare call or a JSON list), and a
    string containing an end marker does not end a valid block. ``tools`` is accepted and ignored
    (values are typed by their literal syntax, so no schema typing; undeclared tools are reported).
    ``reasoning_open=True``: the prompt opened ``<think>``, the output starts inside it.
    """

    name: ClassVar[str] = "pythonic"
    markers: ClassVar[tuple[str, ...]] = (TC_START, TC_END, PY_START, PY_END, *THINK)
    call_starts: ClassVar[tuple[str, ...]] = STARTS  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = ("<|eot_id|>", "<|eom_id|>", "<|eot|>", "<|eom|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>")
    covers: ClassVar[str] = (
        "Llama 3.2 / Llama 4 pythonic tool calls (bare or <|python_start|>), LFM2 / LFM2.5 (<|tool_call_start|>), "
        "other models prompted for [f(a=1)] lists"
    )

    STARTS = STARTS
    THINK = THINK
    HEAD_BLOCK = True  # a bare list at the start of the body

    def read(self, text: str, s: int, mark: str, final: bool) -> tuple[int, list[ToolCall] | None] | None:
        """The grammar: the bare list at the body's start (:data:`HEAD`: its calls, or nothing
        there) or the wrapped block at a start marker (:func:`read_wrapped`)."""
        if mark != HEAD:
            return read_wrapped(text, s, mark, final)
        if not text.startswith("[", s):
            return s, None
        got = _list_at(text, s, final)
        if got is None:
            return None
        return (s, None) if got is False else (got[1], [ToolCall(c[0], c[1]) for c in got[0]])

    def wake(self, mark: str) -> MarkerWake:
        """A bare list is read when its ``]`` arrives (or it can be no list): no end marker
        follows it; a wrapped block when its end marker arrives."""
        if mark == HEAD:
            return ValueEndWake((), 0, "[", scanner=ListScan, then_text=False)
        return MarkerWake((WRAPS[mark],), len(mark))
