"""MiniMax-M2 tool calls: ``<minimax:tool_call><invoke name="F"><parameter name="K">V</parameter></invoke></minimax:tool_call>``.

Output syntax (tool-call-formats.md §12): a block ``<minimax:tool_call>`` holds one or more
``<invoke name="NAME">`` ... ``</invoke>`` elements, each holding ``<parameter name="KEY">VALUE
</parameter>`` elements, and ends with ``</minimax:tool_call>``; the template puts a newline after
the opening tag and after each element. Values are raw text (strings as they are, other types as
JSON); types are recovered from the request's tool schema with :mod:`replay.parsers._schema`.
Reasoning: the generation prompt ends with ``<think>\\n`` (interleaved thinking), so the output
normally starts inside reasoning and closes it with ``</think>``; construct the parser with
``reasoning_open=True`` for such outputs. The split uses :mod:`replay.parsers._reasoning`.

Checked against public implementations (facts only): SGLang ``MinimaxM2Detector`` takes blocks
from ``<minimax:tool_call>`` to the first ``</minimax:tool_call>`` (an unterminated block is
content in its whole-text parse, while its streaming parser sends each invoke at ``</invoke>``),
reads the invoke name up to ``">`` and strips it, and strips all leading and trailing newlines
(only newlines) of a parameter value; vLLM ``MinimaxM2ToolParser`` strips whitespace of names
and accepts single or double quotes around them (its whole-text path also accepts no quotes).
Both type values from the schema (SGLang treats an undeclared parameter as a string; this module
uses the project's shared rule, which JSON-decodes it), and both drop calls whose name is not a
declared tool in streaming. Only ``<minimax:tool_call>`` and ``</minimax:tool_call>`` (and
``<think>``/``</think>``) are special tokens; ``<invoke``/``<parameter`` tags are ordinary text
and may arrive split across deltas.

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking). "ws" is space, tab, CR, LF.

* A block starts at ``<minimax:tool_call>``. Then, repeatedly: ws, then ``</minimax:tool_call>``
  (the block ends) or an invoke: ``<invoke name=`` ATTR ``>``, then repeatedly ws and either
  ``</invoke>`` (the invoke is complete) or a parameter ``<parameter name=`` ATTR ``>`` VALUE
  ``</parameter>``.
* ATTR is the text up to the first ``>``; it must not contain ``<``; it is stripped, one pair of
  matching wrapping quotes (``"`` or ``'``) is removed, and the name must not be empty.
* VALUE is the raw text up to the first ``</parameter>`` (so ``</invoke>`` or
  ``</minimax:tool_call>`` inside a value is value text), with all leading and trailing newlines
  removed (SGLang's rule). A repeated parameter keeps the last value (at the first position).
* A well-formed block gives its invokes as calls, in order; an empty well-formed block gives
  nothing (pure framing). Arguments: ``json.dumps({key: convert_value(value, declared type)},
  ensure_ascii=False)``, ``"{}"`` for an invoke without parameters. Undeclared tools are reported.
  A value decoded as JSON and nested deeper than :data:`~replay.parsers._jsonscan.MAX_DEPTH` is a
  failure point at its ``</parameter>``.
* The block is the unit: anything else where the grammar expects something else (the *failure
  point*) makes the whole block content, verbatim, up to and including the first
  ``</minimax:tool_call>`` at or after the failure point; when a ``<minimax:tool_call>`` comes
  first, the content stops before it and a new block starts there.
* A block cut off by the end of the text is calls when it holds at least one complete invoke
  followed only by ws (the stream ended between invokes); otherwise it is content to the end.
* Content is all body text outside call blocks, verbatim; reasoning is kept out of content and
  calls. Text after the last block is content (SGLang once lost it, #35564).

Streaming: a buffered state machine over the body left by the reasoning splitter. Outside a block
it emits text as soon as it cannot be the start of ``<minimax:tool_call>``. Inside a block it walks
the grammar incrementally (each state keeps its scan position; searches cover new text only) and
sends the block's calls when ``</minimax:tool_call>`` arrives, or from ``finish()`` for a block
the stream cut off between invokes: one tool-call delta per call, with the name and exactly the
whole-text parse's arguments.

End token ``[e~[`` (MiniMax's end of message, ``end_tokens``) is removed from the raw text in both paths.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from replay.parsers._family import StreamParser, parse_blocks
from replay.parsers._jsonscan import TOO_DEEP
from replay.parsers._markers import find_marker
from replay.parsers._reasoning import THINK, ReasoningSplitter, split_reasoning
from replay.parsers._schema import convert_value, declared_types
from replay.parsers.base import ParseResult, StreamDelta, ToolCall

START = "<minimax:tool_call>"
END = "</minimax:tool_call>"
INVOKE_OPEN = "<invoke name="
INVOKE_CLOSE = "</invoke>"
PARAM_OPEN = "<parameter name="
PARAM_CLOSE = "</parameter>"
TAGS = (START, END, INVOKE_OPEN, INVOKE_CLOSE, PARAM_OPEN, PARAM_CLOSE)
#: the special tokens a server sends whole (the element tags are plain text)
MARKERS = (START, END) + THINK

_WS = " \t\r\n"
_MAXTAG = max(len(t) for t in TAGS)
_EDGE_RE = re.compile(re.escape(START) + "|" + re.escape(END))  # whole-text parse only


def attr_name(raw: str) -> str:
    """The name in a ``name=`` attribute's raw text (up to ``>``): stripped, and one pair of
    matching wrapping quotes removed (chars in, chars out; may be empty)."""
    name = raw.strip()
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "\"'":
        name = name[1:-1]
    return name


def clean_value(raw: str) -> str:
    """A parameter's raw text without its leading and trailing newlines (SGLang's rule)."""
    return raw.strip("\n")


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in _WS:
        pos += 1
    return pos


class MiniMaxM2Parser(StreamParser):
    """Tool parser for MiniMax-M2 (and M2.1, which keeps the format): ``<minimax:tool_call>`` blocks of
    ``<invoke>``/``<parameter>`` elements.

    ``tools``: the request's OpenAI tool declarations, used to type parameter values
    (:func:`replay.parsers._schema.convert_value`); ``reasoning_open``: the generation prompt
    ended with ``<think>`` (MiniMax-M2's template always does), so the output starts inside the
    reasoning section.

    Mirrors SGLang ``MinimaxM2Detector`` and vLLM ``MinimaxM2ToolParser`` in syntax; deliberate
    differences (module docstring): values are read tag-aware, a malformed block is content and
    parsing goes on, undeclared tools are reported rather than dropped, and typing uses this
    project's shared schema rule.
    """

    name: ClassVar[str] = "minimax_m2"
    markers: ClassVar[tuple[str, ...]] = MARKERS
    call_starts: ClassVar[tuple[str, ...]] = (START,)  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = ("[e~[",)
    covers: ClassVar[str] = "MiniMaxAI/MiniMax-M2 and MiniMax-M2.1 (<minimax:tool_call> <invoke>/<parameter> XML calls)"

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        super().__init__(tools, ReasoningSplitter(THINK, open=reasoning_open))
        self.reasoning_open = reasoning_open
        self._types = declared_types(tools)
        self._state = "out"  # out, between, iname, params, pname, value, fail
        self._s = 0  # scan position in _buf (chars)
        self._b = 0  # start of the open block in _buf
        self._e = 0  # start of the current attribute / value text in _buf
        self._r = 0  # start of the current invoke in _buf
        self._calls: list[tuple[ToolCall, int, int]] = []  # decided invokes of the open block, with raw span
        self._name = ""
        self._key = ""
        self._args: dict[str, Any] = {}

    def _convert(self, name: str, key: str, raw: str) -> Any:
        return convert_value(clean_value(raw), self._types.get(name, {}).get(key))

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion) -> content, calls and reasoning, per the
        module rules. Never raises on malformed output."""
        text = self.strip_end_tokens(text)
        reasoning, body = split_reasoning(text, THINK, open=self.reasoning_open)
        content, calls = parse_blocks(body, (START,), self._whole_block)
        return ParseResult(content=content, calls=tuple(calls), reasoning=reasoning)

    def _whole_block(self, text: str, s: int, _mark: str = START) -> tuple[int, list[ToolCall] | None]:
        """``(end, calls)`` for the block starting at ``s``: ``end`` just after its extent
        (chars); ``calls`` None when the block is content."""
        n = len(text)
        calls: list[ToolCall] = []
        q = s + len(START)
        while True:
            q = _skip_ws(text, q)
            if text.startswith(END, q):
                return q + len(END), calls
            if q == n:
                return n, (calls or None)
            if not text.startswith(INVOKE_OPEN, q):
                return _whole_fail(text, q)
            g, name = _open_tag_name(text, q + len(INVOKE_OPEN))
            if g < 0:
                return n, None
            if name is None:
                return _whole_fail(text, g)
            args: dict[str, Any] = {}
            q = g + 1
            while True:
                q = _skip_ws(text, q)
                if text.startswith(INVOKE_CLOSE, q):
                    q += len(INVOKE_CLOSE)
                    calls.append(ToolCall(name, json.dumps(args, ensure_ascii=False)))
                    break
                if not text.startswith(PARAM_OPEN, q):
                    return _whole_fail(text, q)
                g, key = _open_tag_name(text, q + len(PARAM_OPEN))
                if g < 0:
                    return n, None
                if key is None:
                    return _whole_fail(text, g)
                v1 = text.find(PARAM_CLOSE, g + 1)
                if v1 < 0:
                    return n, None
                value = self._convert(name, key, text[g + 1 : v1])
                if value is TOO_DEEP:
                    return _whole_fail(text, v1)
                args[key] = value
                q = v1 + len(PARAM_CLOSE)

    # ---------------------------------------------------------------- streaming
    def _drain(self, final: bool) -> StreamDelta:
        out = StreamDelta()
        parts: list[str] = []
        buf = self._buf
        pos = 0
        while True:
            if self._state == "out":  # here the scan position _s is pos
                i, mark = find_marker(buf, (START,), final, self._s)
                parts.append(buf[pos:i])
                if not mark:
                    pos = self._s = i
                    break
                self._b = i
                self._s = i + len(START)
                self._calls = []
                self._state = "between"
            decided = self._step(buf, final)
            if decided is None:
                pos = self._b
                break
            end, ok = decided
            if not ok:
                parts.append(buf[self._b : end])
            else:
                for call, r0, r1 in self._calls:
                    # raw: the invoke's text after its ">", parameters and </invoke> included
                    self._send(out, call.name, call.arguments, buf[r0:r1])
            self._calls = []
            pos = self._s = end
            self._state = "out"
        if pos:
            self._buf = buf[pos:]
            for attr in ("_s", "_b", "_e", "_r"):
                setattr(self, attr, getattr(self, attr) - pos)
            self._calls = [(c, r0 - pos, r1 - pos) for c, r0, r1 in self._calls]
        out.content = "".join(parts)
        return out

    def _expect(self, buf: str, q: int, expected: tuple[str, ...], final: bool) -> str | None:
        """The tag of ``expected`` at ``q``; ``""`` when the text from ``q`` may still become one
        (not at the end of the stream); None when none can be there."""
        for t in expected:
            if buf.startswith(t, q):
                return t
        if not final and len(buf) - q < _MAXTAG:
            rest = buf[q:]
            if any(t.startswith(rest) for t in expected):
                return ""
        return None

    def _step(self, buf: str, final: bool) -> tuple[int, bool] | None:
        """Move the open block on; None while undecided, else ``(end, is_calls)``."""
        n = len(buf)
        while True:
            st = self._state
            if st in ("between", "params"):
                q = _skip_ws(buf, self._s)
                self._s = q
                if st == "between":
                    tag = self._expect(buf, q, (END, INVOKE_OPEN), final)
                    if tag == END:
                        return q + len(END), True
                    if q == n:
                        return (n, bool(self._calls)) if final else None
                    if tag == INVOKE_OPEN:
                        self._r = q
                        self._e = self._s = q + len(INVOKE_OPEN)
                        self._state = "iname"
                        continue
                else:
                    tag = self._expect(buf, q, (INVOKE_CLOSE, PARAM_OPEN), final)
                    if tag == INVOKE_CLOSE:
                        end = q + len(INVOKE_CLOSE)
                        call = ToolCall(self._name, json.dumps(self._args, ensure_ascii=False))
                        self._calls.append((call, self._r, end))
                        self._s = end
                        self._state = "between"
                        continue
                    if q == n:
                        return (n, False) if final else None
                    if tag == PARAM_OPEN:
                        self._e = self._s = q + len(PARAM_OPEN)
                        self._state = "pname"
                        continue
                if tag == "":
                    return None
                self._state = "fail"
            elif st in ("iname", "pname"):
                g = buf.find(">", self._s)
                if g < 0:
                    if final:
                        return n, False
                    self._s = n
                    return None
                lt = buf.find("<", self._e, g)
                name = attr_name(buf[self._e : g])
                if lt >= 0 or not name:
                    self._s = lt if lt >= 0 else g
                    self._state = "fail"
                    continue
                self._s = g + 1
                if st == "iname":
                    self._name, self._args = name, {}
                    self._r = self._s
                    self._state = "params"
                else:
                    self._key = name
                    self._e = self._s
                    self._state = "value"
            elif st == "value":
                v1 = buf.find(PARAM_CLOSE, self._s)
                if v1 < 0:
                    if final:
                        return n, False
                    self._s = max(self._s, n - len(PARAM_CLOSE) + 1)
                    return None
                value = self._convert(self._name, self._key, buf[self._e : v1])
                if value is TOO_DEEP:
                    self._s, self._state = v1, "fail"
                    continue
                self._args[self._key] = value
                self._s = v1 + len(PARAM_CLOSE)
                self._state = "params"
            else:  # fail: seek the block's end (or a new block's start)
                i = self._seek_edge(buf, final)
                if i is None:
                    return None
                if i == n:
                    return n, False
                if buf.startswith(START, i):
                    return i, False
                return i + len(END), False

    def _seek_edge(self, buf: str, final: bool) -> int | None:
        """Index of the first ``<minimax:tool_call>`` or ``</minimax:tool_call>`` at or after the
        scan position; ``len(buf)`` at the end of the stream when none; None while waiting."""
        n = len(buf)
        s = self._s
        while True:
            i = buf.find("<", s)
            if i < 0:
                if final:
                    return n
                self._s = n
                return None
            if buf.startswith(START, i) or buf.startswith(END, i):
                return i
            if not final and n - i < len(END) and (START.startswith(buf[i:]) or END.startswith(buf[i:])):
                self._s = i
                return None
            s = i + 1


def _open_tag_name(text: str, a: int) -> tuple[int, str | None]:
    """The name attribute of an ``<invoke name=...>`` / ``<parameter name=...>`` tag whose
    attribute text starts at ``a`` (chars): ``(g, name)`` with ``g`` the index of its ``>``;
    ``(-1, None)`` when the text ends before ``>``; ``(p, None)`` when the tag is malformed at
    ``p`` (a ``<`` inside it, or no usable name)."""
    g = text.find(">", a)
    if g < 0:
        return -1, None
    lt = text.find("<", a, g)
    if lt >= 0:
        return lt, None
    return g, (attr_name(text[a:g]) or None)


def _whole_fail(text: str, f: int) -> tuple[int, None]:
    """Extent of a malformed block whose failure point is ``f``: through the first
    ``</minimax:tool_call>`` at or after ``f``, or up to a ``<minimax:tool_call>`` met first, or
    the end."""
    m = _EDGE_RE.search(text, f)
    if m is None:
        return len(text), None
    return (m.start(), None) if m.group() == START else (m.end(), None)
