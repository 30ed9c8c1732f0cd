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

Streaming: outside a block, text is emitted as soon as it cannot be the start of one of the
markers acted upon (a held-back suffix); a reasoning section is streamed as it arrives (its first
8 chars wait until the ``thought`` prefix is decided). A block is buffered and scanned once,
incrementally, by :class:`ArgsScanner`; when decided, its call is sent in one tool-call delta (name
once, arguments exactly the whole-text string), or its text as content.

End tokens ``<turn|>`` and ``<eos>`` (``end_tokens``) are removed from the raw text in both paths.
"""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar

from replay.parsers._family import NoReasoning, StreamParser
from replay.parsers._jsonscan import MAX_DEPTH, skip_ws
from replay.parsers._markers import partial_marker_suffix
from replay.parsers.base import ParseResult, StreamDelta, ToolCall

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
_OUT_MAX = max(len(m) for m in OUTSIDE)
CALL_WORD = "call:"
THOUGHT = "thought"
_HEAD = len(THOUGHT) + 1
_KEY_STOP = frozenset(":,{}[]<")
_BARE_STOP = frozenset(",}]")
_BARE_BAD = frozenset("{[<")
_SEP = frozenset(" \t\n\r,")


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
    """Whole-text ARGS parse: the text is not a complete ``call:NAME{ARGS}``."""


def parse_call_head(text: str, pos: int) -> tuple[str, dict[str, Any], int]:
    """Whole-text parse of ``call:NAME{ARGS}`` at ``pos`` (just after ``<|tool_call>``).

    Returns ``(name, arguments, k)`` with ``k`` the index just after the closing ``}`` (chars);
    raises :class:`_Bad` when the text there is not one (malformed or cut off).
    """
    n = len(text)
    if not text.startswith(CALL_WORD, pos):
        raise _Bad
    i = pos + len(CALL_WORD)
    j = i
    while j < n and is_name_char(text[j]):
        j += 1
    if j == i or j >= n or text[j] != "{":
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
            raise _Bad
        c = text[i]
        closed = None
        if isinstance(cont, dict) and top[1] is None:
            if c == "}":
                closed = cont
            else:
                if text.startswith(STR, i):
                    e = text.find(STR, i + len(STR))
                    if e < 0:
                        raise _Bad
                    key = text[i + len(STR) : e]
                    i = e + len(STR)
                else:
                    e = i
                    while e < n and text[e] not in _KEY_STOP:
                        e += 1
                    key = text[i:e].strip()
                    if not key:
                        raise _Bad
                    i = e
                if i >= n or text[i] != ":":
                    raise _Bad
                top[1] = key
                i += 1
                while i < n and text[i] in " \t\n\r":
                    i += 1
                if i >= n:
                    raise _Bad
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
                raise _Bad
            _attach(top, text[i + len(STR) : e])
            i = e + len(STR)
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
            if e >= n or not text[i:e].strip():
                raise _Bad
            _attach(top, bare_value(text[i:e]))
            i = e
        # after a value: whitespace, then "," or the container's close
        while i < n and text[i] in " \t\n\r":
            i += 1
        if i >= n:
            raise _Bad
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


MORE = "more"
DONE = "done"
INVALID = "invalid"


class ArgsScanner:
    """Incremental scan of ``call:NAME{ARGS}`` for the streaming parser.

    ``advance(buf, final)`` takes the parser's growing buffer (block body from index ``start``,
    only appended to until decided) and returns ``"more"``, ``"done"`` (then :attr:`end` is the
    index just after the closing ``}``, :attr:`name` and :attr:`value` are set) or ``"invalid"``.
    Each character is examined once (strings are skipped with ``str.find`` of ``<|"|>`` over new
    text only), so a block costs linear time however it is chunked. Same grammar as
    :func:`parse_call_head`, implemented separately.
    """

    def __init__(self, start: int) -> None:
        self.i = start
        self.state = "word"
        self.mark = start  # start of the current token (name, key, bare value, string body)
        self.name = ""
        self.value: dict[str, Any] | None = None
        self.end: int | None = None
        self.status = MORE
        self._stack: list[list[Any]] = []
        self._key: str | None = None

    def advance(self, buf: str, final: bool) -> str:
        """Scan ``buf`` from where the last call stopped; return the status (see class doc)."""
        if self.status == MORE:
            self.status = self._run(buf)
            if self.status == MORE and final:
                self.status = INVALID
        return self.status

    def _run(self, buf: str) -> str:  # noqa: C901 - one state machine
        n = len(buf)
        i = self.i
        while i < n:
            st = self.state
            c = buf[i]
            if st == "word":
                k = i - self.mark
                if c != CALL_WORD[k]:
                    return INVALID
                i += 1
                if k + 1 == len(CALL_WORD):
                    self.state, self.mark = "name", i
            elif st == "name":
                if is_name_char(c):
                    i += 1
                elif c == "{" and i > self.mark:
                    self.name = buf[self.mark : i]
                    self.value = {}
                    self._stack = [[self.value, None]]
                    self.state = "key"
                    i += 1
                else:
                    return INVALID
            elif st in ("key", "item"):  # separators, then a key / an item, or the close
                if c in _SEP:
                    i += 1
                elif st == "key" and c == "}" or st == "item" and c == "]":
                    i += 1
                    if self._close():
                        self.i = i
                        self.end = i
                        return DONE
                elif c == "<":
                    if buf.startswith(STR, i):
                        i += len(STR)
                        self.mark = i
                        self.state = "qkey" if st == "key" else "str"
                    elif STR.startswith(buf[i : i + len(STR)]):
                        break  # a partial delimiter at the end of the buffer
                    else:
                        return INVALID
                elif st == "key":
                    if c in _KEY_STOP:
                        return INVALID
                    self.state, self.mark = "bkey", i
                else:
                    i = self._value_start(buf, i, c)
                    if i < 0:
                        return INVALID
            elif st == "bkey":
                if c == ":":
                    key = buf[self.mark : i].strip()
                    if not key:
                        return INVALID
                    self._stack[-1][1] = key
                    self.state = "value"
                    i += 1
                elif c in _KEY_STOP:
                    return INVALID
                else:
                    i += 1
            elif st in ("qkey", "str"):
                e = buf.find(STR, i)
                if e < 0:
                    i = max(i, n - len(STR) + 1)
                    break
                text = buf[self.mark : e]
                i = e + len(STR)
                if st == "qkey":
                    self._stack[-1][1] = text
                    self.state = "colon"
                else:
                    _attach(self._stack[-1], text)
                    self.state = "after"
            elif st == "colon":
                if c != ":":
                    return INVALID
                self.state = "value"
                i += 1
            elif st == "value":
                if c in " \t\n\r":
                    i += 1
                elif c == "<":
                    if buf.startswith(STR, i):
                        i += len(STR)
                        self.mark = i
                        self.state = "str"
                    elif STR.startswith(buf[i : i + len(STR)]):
                        break
                    else:
                        return INVALID
                else:
                    i = self._value_start(buf, i, c)
                    if i < 0:
                        return INVALID
            elif st == "bare":
                if c in _BARE_STOP:
                    raw = buf[self.mark : i]
                    if not raw.strip():
                        return INVALID
                    _attach(self._stack[-1], bare_value(raw))
                    self.state = "after"  # c is read again there
                elif c in _BARE_BAD:
                    return INVALID
                else:
                    i += 1
            else:  # "after": whitespace, then "," or the container's close
                cont = self._stack[-1][0]
                closer = "}" if isinstance(cont, dict) else "]"
                if c in " \t\n\r":
                    i += 1
                elif c == ",":
                    self.state = "key" if closer == "}" else "item"
                    i += 1
                elif c == closer:
                    i += 1
                    if self._close():
                        self.i = i
                        self.end = i
                        return DONE
                else:
                    return INVALID
        self.i = i
        return MORE

    def _value_start(self, buf: str, i: int, c: str) -> int:
        """Start a non-string value at ``i``; the next index, or -1 when invalid."""
        if c in "{[" and len(self._stack) >= MAX_DEPTH:
            return -1
        if c == "{":
            self._stack.append([{}, None])
            self.state = "key"
        elif c == "[":
            self._stack.append([[], None])
            self.state = "item"
        elif c in _BARE_STOP or c in _BARE_BAD:
            return -1
        else:
            self.state, self.mark = "bare", i
        return i + 1

    def _close(self) -> bool:
        """Close the innermost container; True when it was the ARGS object itself."""
        frame = self._stack.pop()
        if not self._stack:
            return True
        _attach(self._stack[-1], frame[0])
        self.state = "after"
        return False


class Gemma4Parser(StreamParser):
    """Tool parser for Google Gemma 4 (``<|tool_call>call:NAME{...}<tool_call|>``, ``<|"|>`` strings).

    Mirrors vLLM ``Gemma4ToolParser`` (``--tool-call-parser gemma4``) in syntax and value
    conversion; the grammar is strict and string-aware where vLLM's regex is not, and the rules
    for malformed output are this module's (module docstring). Splits off ``<|channel>...
    <channel|>`` reasoning itself (the family's own channel syntax, not ``<think>``). ``tools`` is
    accepted and ignored (values are typed by the notation).
    """

    name: ClassVar[str] = "gemma4"
    covers: ClassVar[str] = "Google Gemma 4 (gemma-4-*-it, incl. the interleaved-thinking template): <|tool_call>call:NAME{...}<tool_call|>"
    markers: ClassVar[tuple[str, ...]] = MARKERS
    call_starts: ClassVar[tuple[str, ...]] = (START,)  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = (TURN_END, "<eos>")

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        super().__init__(tools, NoReasoning())  # the channel sections are read by _drain
        self._reasoning_open = reasoning_open
        self._state = "reason" if reasoning_open else "out"  # out | head | reason | block
        self._scan: ArgsScanner | None = None
        self._seek = 0

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion) -> reasoning, content and calls, per the
        module rules. Never raises on model output."""
        text = self.strip_end_tokens(text)
        content: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCall] = []
        n = len(text)
        pos = 0
        if self._reasoning_open:
            e = text.find(CH_END)
            reasoning.append(text if e < 0 else text[:e])
            pos = n if e < 0 else e + len(CH_END)
        while pos < n:
            i = text.find("<", pos)
            mark = None
            while i >= 0:
                mark = next((m for m in OUTSIDE if text.startswith(m, i)), None)
                if mark is not None:
                    break
                i = text.find("<", i + 1)
            if i < 0:
                content.append(text[pos:])
                break
            content.append(text[pos:i])
            p = i + len(mark)
            if mark in DROPPED:
                pos = p
            elif mark == CH_START:
                e = text.find(CH_END, p)
                section = text[p:] if e < 0 else text[p:e]
                reasoning.append(section[thought_prefix_len(section) :])
                pos = n if e < 0 else e + len(CH_END)
            else:  # a tool-call block
                try:
                    name, args, k = parse_call_head(text, p)
                except _Bad:
                    e = text.find(END, p)
                    end = n if e < 0 else e + len(END)
                    content.append(text[i:end])
                    pos = end
                    continue
                m = skip_ws(text, k)
                if text.startswith(END, m) or m == n:
                    calls.append(ToolCall(name, json.dumps(args, ensure_ascii=False)))
                    pos = n if m == n else m + len(END)
                else:
                    e = text.find(END, k)
                    end = n if e < 0 else e + len(END)
                    content.append(text[i:end])
                    pos = end
        return ParseResult(content="".join(content), calls=tuple(calls), reasoning="".join(reasoning))

    # ---------------------------------------------------------------- streaming
    def _drain(self, final: bool) -> StreamDelta:  # noqa: C901 - one state machine
        out = StreamDelta()
        content: list[str] = []
        reasoning: list[str] = []
        buf = self._buf
        pos = 0
        while True:
            state = self._state
            if state == "out":
                i = buf.find("<", pos)
                mark = None
                partial = False
                while i >= 0:
                    mark = next((m for m in OUTSIDE if buf.startswith(m, i)), None)
                    if mark is not None:
                        break
                    if len(buf) - i < _OUT_MAX and any(m.startswith(buf[i:]) for m in OUTSIDE):
                        partial = True
                        break
                    i = buf.find("<", i + 1)
                if mark is None:
                    cut = i if (partial and not final) else len(buf)
                    content.append(buf[pos:cut])
                    pos = cut
                    break
                content.append(buf[pos:i])
                pos = i + len(mark)
                if mark == CH_START:
                    self._state = "head"
                elif mark == START:
                    # the block's text is kept in the buffer from its start marker
                    buf = buf[i:]
                    pos = 0
                    self._scan = ArgsScanner(len(START))
                    self._state = "block"
            elif state in ("head", "reason"):
                e = buf.find(CH_END, pos)
                if state == "head":
                    if e >= 0:
                        safe_len = e - pos
                    else:
                        safe_len = max(0, len(buf) - pos - (0 if final else partial_marker_suffix(buf, (CH_END,))))
                    if e < 0 and safe_len < _HEAD and not final:
                        break
                    pos += thought_prefix_len(buf[pos : pos + min(_HEAD, safe_len)])
                    self._state = "reason"
                    continue
                if e >= 0:
                    reasoning.append(buf[pos:e])
                    pos = e + len(CH_END)
                    self._state = "out"
                    continue
                keep = 0 if final else partial_marker_suffix(buf, (CH_END,))
                cut = max(pos, len(buf) - keep)
                reasoning.append(buf[pos:cut])
                pos = cut
                break
            else:  # block: buf[pos:] starts with the block's start marker
                scan = self._scan
                assert scan is not None
                status = scan.advance(buf, final)
                end: int | None = None
                is_call = False
                if status == MORE:
                    break
                if status == DONE:
                    assert scan.end is not None
                    m = skip_ws(buf, scan.end)
                    if buf.startswith(END, m):
                        end, is_call = m + len(END), True
                    elif m == len(buf):
                        if not final:
                            break
                        end, is_call = m, True
                    elif not final and END.startswith(buf[m:]):
                        break
                    else:
                        self._seek = max(self._seek, scan.end)
                if end is None:  # not a call: up to the first end marker after the seek point
                    if self._seek == 0:
                        self._seek = scan.end if status == DONE and scan.end is not None else len(START)
                    e = buf.find(END, self._seek)
                    if e < 0:
                        if not final:
                            self._seek = max(self._seek, len(buf) - len(END) + 1)
                            break
                        end = len(buf)
                    else:
                        end = e + len(END)
                if is_call:
                    assert scan.value is not None
                    args = json.dumps(scan.value, ensure_ascii=False)
                    self._send(out, scan.name, args, buf[:end])  # raw: the block's text
                else:
                    content.append(buf[:end])
                buf = buf[end:]
                pos = 0
                self._scan = None
                self._seek = 0
                self._state = "out"
        self._buf = buf[pos:]
        if self._state == "block":
            # keep the block's text at the indices the scanner expects
            assert pos == 0
        out.content = "".join(content)
        out.reasoning = "".join(reasoning)
        return out
