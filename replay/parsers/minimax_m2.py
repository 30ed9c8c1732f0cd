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

Streaming: the engine of :class:`~replay.parsers._family.GrammarParser` over the body left by the
reasoning splitter, with the same grammar (:meth:`MiniMaxM2Parser.read`). Outside a block it emits
text as soon as it cannot be the start of ``<minimax:tool_call>``; a block is read again when its
start or end tag arrives, and the engine sends the block's calls when ``</minimax:tool_call>`` arrives, or from ``finish()`` for a block
the stream cut off between invokes: one tool-call delta per call, with the name and exactly the
whole-text parse's arguments.

End token ``[e~[`` (MiniMax's end of message, ``end_tokens``) is removed from the raw text in both paths.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from replay.parsers._family import GrammarParser
from replay.parsers._jsonscan import TOO_DEEP, dumps_arguments
from replay.parsers._reasoning import THINK
from replay.parsers._schema import convert_value, declared_types
from replay.parsers.base import ToolCall

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


class MiniMaxM2Parser(GrammarParser):
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

    STARTS = (START,)
    WAKE = (START, END)  # every decision of the grammar comes at one of them (or the end)
    THINK = THINK

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        super().__init__(tools, reasoning_open=reasoning_open)
        self.reasoning_open = reasoning_open
        self._types = declared_types(tools)

    def _convert(self, name: str, key: str, raw: str) -> Any:
        return convert_value(clean_value(raw), self._types.get(name, {}).get(key))

    def read(self, text: str, s: int, _mark: str, final: bool) -> tuple[int, list[ToolCall] | None] | None:
        """The grammar: ``(end, calls)`` for the block starting at ``s``: ``end`` just after its
        extent (chars); ``calls`` None when the block is content; None on a stream's prefix that
        cannot decide it yet (a malformed block waits for its END or START, a call for its END)."""
        n = len(text)
        cut = (n, None) if final else None  # the text ends inside the block
        calls: list[ToolCall] = []
        q = s + len(START)
        while True:
            q = _skip_ws(text, q)
            if text.startswith(END, q):
                return q + len(END), calls
            if q == n:
                return (n, (calls or None)) if final else None
            if not text.startswith(INVOKE_OPEN, q):
                return _whole_fail(text, q, final)
            g, name = _open_tag_name(text, q + len(INVOKE_OPEN))
            if g < 0:
                return cut
            if name is None:
                return _whole_fail(text, g, final)
            args: dict[str, Any] = {}
            q = g + 1
            while True:
                q = _skip_ws(text, q)
                if text.startswith(INVOKE_CLOSE, q):
                    q += len(INVOKE_CLOSE)
                    calls.append(ToolCall(name, dumps_arguments(args)))
                    break
                if not text.startswith(PARAM_OPEN, q):
                    return _whole_fail(text, q, final)
                g, key = _open_tag_name(text, q + len(PARAM_OPEN))
                if g < 0:
                    return cut
                if key is None:
                    return _whole_fail(text, g, final)
                v1 = text.find(PARAM_CLOSE, g + 1)
                if v1 < 0:
                    return cut
                value = self._convert(name, key, text[g + 1 : v1])
                if value is TOO_DEEP:
                    return _whole_fail(text, v1, final)
                args[key] = value
                q = v1 + len(PARAM_CLOSE)


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


def _whole_fail(text: str, f: int, final: bool = True) -> tuple[int, None] | None:
    """Extent of a malformed block whose failure point is ``f``: through the first
    ``</minimax:tool_call>`` at or after ``f``, or up to a ``<minimax:tool_call>`` met first, or
    the end (None on a stream's prefix with neither yet)."""
    m = _EDGE_RE.search(text, f)
    if m is None:
        return (len(text), None) if final else None
    return (m.start(), None) if m.group() == START else (m.end(), None)
