"""GLM-4.5 / 4.6 / 4.7 / GLM-5 tool calls: ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>``.

Output syntax (tool-call-formats.md §9): a call is a block ``<tool_call>`` NAME, then zero or more
pairs ``<arg_key>K</arg_key>`` ``<arg_value>V</arg_value>``, then ``</tool_call>``. GLM-4.5/4.6
write a newline after the name and after each tag pair (``<tool_call>f\\n<arg_key>k</arg_key>\\n
<arg_value>v</arg_value>\\n</tool_call>``); GLM-4.7 and GLM-5 write no newlines at all, and a
zero-argument call is ``<tool_call>f</tool_call>``. Several calls are consecutive blocks. Values
are raw text: strings as they are, other types as JSON (``tojson`` in the template); the type is
recovered from the request's tool schema with :mod:`replay.parsers._schema`. Reasoning is a
leading ``<think>...</think>`` section, split off with :mod:`replay.parsers._reasoning`
(``reasoning_open=True`` when the generation prompt already opened it).

Checked against public implementations (facts only): SGLang ``Glm4MoeDetector`` needs a newline
(or a literal backslash-n) after the name, which is why SGLang has a separate ``Glm47MoeDetector``
whose name is the text up to ``<arg_key>`` or ``</tool_call>``, stripped; vLLM's
``Glm4MoeModelToolParser`` (streaming) also ends the name at the first newline or ``<arg_key>``.
Keys are stripped; ``</arg_key>`` and ``<arg_value>`` may be separated by whitespace or a literal
backslash-n (SGLang's pair regex ``(?:\\\\n|\\s)*``). String-typed values keep their raw text
(vLLM does not strip them). Both upstream whole-text parses take blocks with a non-greedy
``<tool_call>.*?</tool_call>`` regex, so a block without ``</tool_call>`` is never a call; SGLang
4.7 joins all text outside blocks (and strips it) as content, vLLM returns only the text before
the first block.

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking). "Tag" below means one of
``<tool_call> </tool_call> <arg_key> </arg_key> <arg_value> </arg_value>``; "separator" means any
run of space, tab, CR, LF and the two-character literal backslash-n.

* A block starts at ``<tool_call>``. The name is the text up to the next tag, which must be
  ``<arg_key>`` or ``</tool_call>``; the name is stripped of whitespace and trailing literal
  backslash-n and must not be empty.
* Then, repeatedly: separators, then ``</tool_call>`` (the call is complete) or ``<arg_key>``. A
  key is the text up to the next tag, which must be ``</arg_key>`` (the key is stripped, may be
  empty); then separators and ``<arg_value>``; the value is the raw text up to the first
  ``</arg_value>`` (value-aware: any other tag inside a value, ``</tool_call>`` included, is
  value text — upstream regexes would cut at ``</tool_call>``). A repeated key keeps the last
  value (at the first key's position, as a dict does).
* Any other text where the grammar expects something else is a malformed block at that point
  (the *failure point*): the block is content, verbatim, up to and including the first
  ``</tool_call>`` at or after the failure point; but when a ``<tool_call>`` comes first, the
  content stops before it and a new block starts there. Where the name meets ``<tool_call>``
  the same holds (a block restarts there).
* A block that the end of the text cuts off (no ``</tool_call>`` closing it, in any state) is
  content to the end: no call, as upstream.
* Arguments: ``json.dumps({key: convert_value(value, declared type)}, ensure_ascii=False)``
  (``"{}"`` for no pairs). Calls to undeclared tools are reported (upstream keeps them too). A
  value decoded as JSON and nested deeper than :data:`~replay.parsers._jsonscan.MAX_DEPTH` is a
  failure point at its ``</arg_value>``.
* Content is all body text outside call blocks, verbatim (nothing stripped; a stray
  ``</tool_call>`` outside a block is content). Reasoning is kept out of content and calls.

Streaming: the engine of :class:`~replay.parsers._family.GrammarParser` over the body left by the
reasoning splitter, with the same grammar (:meth:`Glm45Parser.read`). Outside a block it emits text
as soon as it cannot be the start of ``<tool_call>``; a block is read again when ``</tool_call>``
or ``<tool_call>`` arrives, and its call sent when the grammar decides it: one tool-call delta with
the name and the whole-text parse's arguments.
No call is ever sent from ``finish()``: a block still open at the end of the stream is content.

Choices where the upstream suites differ (tests/conformance, ``KNOWN`` in tests/test_conformance.py):

* Calls to undeclared tools: SGLang's ``Glm4MoeDetector`` / ``Glm47MoeDetector`` drop them;
  replay reports them (an audit must see them).
* End tokens ``<|endoftext|>``, ``<|user|>``, ``<|observation|>`` (GLM's stop tokens: the turn
  ends there) are removed from the raw text in both paths.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from replay.parsers._family import GrammarParser
from replay.parsers._jsonscan import TOO_DEEP, dumps_arguments
from replay.parsers._reasoning import THINK
from replay.parsers._schema import convert_value, declared_types
from replay.parsers.base import ToolCall

START = "<tool_call>"
END = "</tool_call>"
KEY_OPEN = "<arg_key>"
KEY_CLOSE = "</arg_key>"
VAL_OPEN = "<arg_value>"
VAL_CLOSE = "</arg_value>"
TAGS = (START, END, KEY_OPEN, KEY_CLOSE, VAL_OPEN, VAL_CLOSE)
MARKERS = TAGS + THINK

_SEP_WS = " \t\r\n"
_LITERAL_NL = "\\n"  # the two characters backslash, n
_MAXTAG = max(len(t) for t in TAGS)

# whole-text parse only: earliest tag (an alternation of literals: no backtracking blow-up)
_TAG_RE = re.compile("|".join(re.escape(t) for t in TAGS))
_EDGE_RE = re.compile(re.escape(START) + "|" + re.escape(END))


def clean_name(raw: str) -> str:
    """The function name from the raw text between ``<tool_call>`` and the tag after it:
    whitespace stripped, trailing literal backslash-n removed (chars in, chars out)."""
    name = raw.strip()
    while name.endswith(_LITERAL_NL):
        name = name[: -len(_LITERAL_NL)].rstrip()
    return name


def skip_separators(text: str, pos: int) -> int:
    """Index (chars) of the first char at or after ``pos`` that does not start a separator
    (whitespace or the literal backslash-n); a lone trailing backslash is not skipped."""
    n = len(text)
    while pos < n:
        c = text[pos]
        if c in _SEP_WS:
            pos += 1
        elif c == "\\" and text.startswith(_LITERAL_NL, pos):
            pos += 2
        else:
            break
    return pos


class Glm45Parser(GrammarParser):
    """Tool parser for GLM-4.5, GLM-4.6, GLM-4.7 and GLM-5 (``<arg_key>``/``<arg_value>`` calls).

    ``tools``: the request's OpenAI tool declarations, used to type parameter values
    (:func:`replay.parsers._schema.convert_value`); ``reasoning_open``: the generation prompt
    ended with ``<think>``, so the output starts inside the reasoning section.

    Mirrors SGLang ``Glm4MoeDetector``/``Glm47MoeDetector`` and vLLM ``Glm4MoeModelToolParser`` /
    ``Glm47MoeModelToolParser`` in syntax (one parser accepts both the 4.5/4.6 newline layout and
    the 4.7 layout without newlines). Deliberate differences (see the module docstring): values
    are read tag-aware, malformed blocks become content and parsing goes on, content is all text
    outside calls kept verbatim, and typing uses this project's shared schema rule.
    """

    name: ClassVar[str] = "glm45"
    markers: ClassVar[tuple[str, ...]] = MARKERS
    call_starts: ClassVar[tuple[str, ...]] = (START,)  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = ("<|endoftext|>", "<|user|>", "<|observation|>")
    covers: ClassVar[str] = "zai-org/THUDM GLM-4.5, GLM-4.5-Air, GLM-4.6, GLM-4.7 (Flash), GLM-5 (<arg_key>/<arg_value> XML calls)"

    STARTS = (START,)
    WAKE = (START, END)  # every decision of the grammar comes at one of them (or the end)
    THINK = THINK

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        super().__init__(tools, reasoning_open=reasoning_open)
        self.reasoning_open = reasoning_open
        self._types = declared_types(tools)

    def _convert(self, name: str, key: str, raw: str) -> Any:
        return convert_value(raw, self._types.get(name, {}).get(key))

    def read(self, text: str, s: int, _mark: str, final: bool) -> tuple[int, list[ToolCall] | None] | None:
        """The grammar: ``(end, [call])`` for the block starting at ``s``: ``end`` just after its
        extent (chars), None for the call when the block is content; None on a stream's prefix
        that cannot decide it yet."""
        n = len(text)
        # the text ends inside the block. On a stream's prefix every other answer is final: a
        # malformed block waits for its END or START (_whole_fail), a call for its END
        cut = (n, None) if final else None
        p = s + len(START)
        m = _TAG_RE.search(text, p)
        if m is None:
            return cut
        if m.group() == START:
            return m.start(), None
        name = clean_name(text[p : m.start()])
        if m.group() not in (KEY_OPEN, END) or not name:
            return _whole_fail(text, m.start(), final)
        args: dict[str, Any] = {}
        q = m.start()
        while True:
            q = skip_separators(text, q)
            if text.startswith(END, q):
                return q + len(END), [ToolCall(name, dumps_arguments(args))]
            if not text.startswith(KEY_OPEN, q):
                return _whole_fail(text, q, final)
            k0 = q + len(KEY_OPEN)
            m = _TAG_RE.search(text, k0)
            if m is None:
                return cut
            if m.group() != KEY_CLOSE:
                return _whole_fail(text, m.start(), final)
            key = text[k0 : m.start()].strip()
            q = skip_separators(text, m.end())
            if not text.startswith(VAL_OPEN, q):
                return _whole_fail(text, q, final)
            v0 = q + len(VAL_OPEN)
            v1 = text.find(VAL_CLOSE, v0)
            if v1 < 0:
                return cut
            value = self._convert(name, key, text[v0:v1])
            if value is TOO_DEEP:
                return _whole_fail(text, v1, final)
            args[key] = value
            q = v1 + len(VAL_CLOSE)


def _whole_fail(text: str, f: int, final: bool = True) -> tuple[int, None] | None:
    """Extent of a malformed block whose failure point is ``f``: through the first
    ``</tool_call>`` at or after ``f``, or up to a ``<tool_call>`` met first, or the end (None on
    a stream's prefix with neither yet)."""
    m = _EDGE_RE.search(text, f)
    if m is None:
        return (len(text), None) if final else None
    return (m.start(), None) if m.group() == START else (m.end(), None)
