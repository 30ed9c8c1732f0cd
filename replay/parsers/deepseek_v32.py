"""DeepSeek V3.2 / V4 tool calls in DSML: ``<｜DSML｜invoke name="F"><｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>...``.

Output syntax (tool-call-formats.md §7): a block ``<｜DSML｜function_calls>`` (V3.2) or
``<｜DSML｜tool_calls>`` (V4) holding invokes, each
``<｜DSML｜invoke name="NAME">`` + parameters + ``</｜DSML｜invoke>``, each parameter
``<｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>``, items separated
by newlines, then ``</｜DSML｜function_calls>`` (``</｜DSML｜tool_calls>``) and optionally
``<｜end▁of▁sentence｜>``. The official encoder writes ``string="true"`` and the raw text for
``str`` values, else ``string="false"`` and ``json.dumps(value, ensure_ascii=False)``; nothing
is escaped. Thinking mode writes the reasoning and ``</think>`` first (the prompt opened
``<think>``). ``｜`` is U+FF5C; the tokens are built here from code points.

Facts checked against public implementations: vLLM's ``deepseekv32_tool_parser.py`` keeps a
``string="true"`` value verbatim (SGLang's V3.2 detector strips it) and types a
``string="false"`` value by the declared schema; both accept only ``true``/``false`` as the flag.
The marker ``｜DSML｜`` is one token and the angle brackets and tag words around it are separate
tokens (a public streaming test replaying a real DeepSeek trace token by token says so), so a
server may split ``<｜DSML｜invoke`` between deltas: only ``｜DSML｜`` is declared a marker here.

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

* Reasoning is split off first by the shared ``<think>`` rule (:mod:`replay.parsers._reasoning`).
* Outside a block, text is content verbatim, except ``<｜end▁of▁sentence｜>``, which is dropped. A
  block opens at ``<｜DSML｜function_calls>`` or ``<｜DSML｜tool_calls>`` and closes at the first
  matching close tag (or the end of the text). The open and close tags and whitespace between
  items inside a block are framing and dropped.
* Inside a block, an item starting with ``<｜DSML｜invoke`` runs to the first
  ``</｜DSML｜invoke>``. It is a call when it is exactly: ``<｜DSML｜invoke``, whitespace,
  ``name="NAME"`` (NAME non-empty, no ``"``), optional whitespace, ``>``, then either a JSON object
  (alone, after stripping whitespace) or a sequence of parameters separated by whitespace, each
  ``<｜DSML｜parameter``, whitespace, ``name="KEY"``, whitespace, ``string="true"`` or
  ``string="false"``, optional whitespace, ``>``, VALUE up to the first ``</｜DSML｜parameter>``;
  then ``</｜DSML｜invoke>``. A VALUE cannot contain ``</｜DSML｜parameter>`` (nothing is escaped).
  Otherwise the item's text is content verbatim and parsing goes on after it. An invoke whose
  ``</｜DSML｜invoke>`` does not come before the block's close tag (or the end of the text) is
  content up to there: a call cut off by the end of the stream is no call.
* Any other text inside a block is content verbatim up to the next ``<｜DSML｜invoke`` or the
  close tag.
* Arguments: ``string="true"``: the VALUE verbatim as a string (vLLM; the encoder does not pad
  it); ``string="false"``: :func:`replay.parsers._schema.convert_value` with the parameter's
  declared type in ``tools`` (undeclared: the JSON value of the stripped text, else the text); a
  JSON body or a JSON-typed value nested deeper than :data:`~replay.parsers._jsonscan.MAX_DEPTH`
  makes the invoke malformed (content). A
  repeated KEY keeps its last value. No parameters: ``{}``. ``json.dumps(args,
  ensure_ascii=False)``. (vLLM and SGLang search only the first block and return everything as
  content on an exception; here every block is read.)

Streaming: the reasoning splitter, then the engine of :class:`~replay.parsers._family.GrammarParser`
over the same grammar (:func:`read_item`; the items of a block are the blocks that follow its open
tag, :data:`ITEMS_OF`): outside a block text is emitted as soon as it cannot start an open tag or
the end-of-sentence token; inside a block each invoke is buffered until its end tag (searched for
only in new text) and its call is sent in one tool-call delta (name once; arguments exactly the
whole-text string). Text inside a block that is no invoke is held until the next invoke or the
close tag.

End token ``<｜end▁of▁sentence｜>`` (``end_tokens``) is removed from the raw text in both paths.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from replay.parsers._family import GrammarParser, MarkerWake
from replay.parsers._jsonscan import TOO_DEEP, loads_or_too_deep, skip_ws
from replay.parsers._markers import first_marker
from replay.parsers._reasoning import THINK
from replay.parsers._schema import convert_value, declared_types
from replay.parsers.base import ToolCall
from replay.parsers.deepseek_v31 import EOS

DSML = "\uff5cDSML\uff5c"  # FULLWIDTH VERTICAL LINE, "DSML", FULLWIDTH VERTICAL LINE
FC_OPEN = f"<{DSML}function_calls>"
FC_CLOSE = f"</{DSML}function_calls>"
TC_OPEN = f"<{DSML}tool_calls>"
TC_CLOSE = f"</{DSML}tool_calls>"
INVOKE = f"<{DSML}invoke"
INVOKE_CLOSE = f"</{DSML}invoke>"
PARAM = f"<{DSML}parameter"
PARAM_CLOSE = f"</{DSML}parameter>"

CLOSE_OF = {FC_OPEN: FC_CLOSE, TC_OPEN: TC_CLOSE}
OUTSIDE = (FC_OPEN, TC_OPEN, EOS)

_INVOKE_HEAD = re.compile(r'\s+name="([^"]+)"\s*>')
_PARAM_HEAD = re.compile(r'\s+name="([^"]*)"\s+string="(true|false)"\s*>')
_WS = " \t\n\r"
#: ``json.dumps(value, ensure_ascii=False)``, the encoder built once: ``json.dumps`` with any
#: non-default option builds a new ``JSONEncoder`` per call (a large share of an invoke's
#: whole-text parse); the encoder keeps no state between calls, so the text is identical.
_DUMPS = json.JSONEncoder(ensure_ascii=False).encode


def parse_invoke(item: str, types: dict[str, dict[str, str]]) -> tuple[str, str] | None:
    """``(name, arguments JSON text)`` for one whole invoke item (``<｜DSML｜invoke`` ...
    ``</｜DSML｜invoke>``, chars) under the module's grammar, or None when it is malformed.
    ``types``: :func:`~replay.parsers._schema.declared_types` of the request's tools."""
    head = _INVOKE_HEAD.match(item, len(INVOKE))
    if head is None or not item.endswith(INVOKE_CLOSE):
        return None
    name = head.group(1)
    body = item[head.end() : len(item) - len(INVOKE_CLOSE)]
    stripped = body.strip(_WS)
    if stripped.startswith("{"):
        try:
            obj = loads_or_too_deep(stripped)
        except ValueError:
            return None
        return (name, _DUMPS(obj)) if isinstance(obj, dict) else None
    declared = types.get(name, {})
    args: dict[str, Any] = {}
    q = 0
    n = len(body)
    while True:
        q = skip_ws(body, q)
        if q == n:
            break
        if not body.startswith(PARAM, q):
            return None
        m = _PARAM_HEAD.match(body, q + len(PARAM))
        if m is None:
            return None
        v_end = body.find(PARAM_CLOSE, m.end())
        if v_end < 0:
            return None
        key, flag, value = m.group(1), m.group(2), body[m.end() : v_end]
        typed = value if flag == "true" else convert_value(value, declared.get(key))
        if typed is TOO_DEEP:
            return None
        args.pop(key, None)
        args[key] = typed
        q = v_end + len(PARAM_CLOSE)
    return name, _DUMPS(args)


#: pseudo-marks of the items of an open block, by its close tag (the block that follows an open
#: tag and every item, :data:`replay.parsers._family.Grammar`)
ITEMS_OF = {FC_CLOSE: "\x00items" + FC_CLOSE, TC_CLOSE: "\x00items" + TC_CLOSE}
_CLOSE_OF_ITEMS = {v: k for k, v in ITEMS_OF.items()}
_INVOKE_ENDS = {c: (INVOKE_CLOSE, c) for c in ITEMS_OF}  # what ends an invoke item in a block closed by c
_TEXT_ENDS = {c: (INVOKE, c) for c in ITEMS_OF}  # what ends a text item


def read_item(
    text: str, s: int, mark: str, types: dict[str, dict[str, str]], final: bool = True
) -> tuple[int, list[ToolCall] | None] | tuple[int, list[ToolCall] | None, str] | None:
    """The grammar: at an outside marker ``mark`` (an open tag: framing, the block's items follow;
    the end-of-sentence token: dropped), or at the next item of an open block (``mark`` one of
    :data:`ITEMS_OF`): whitespace between items and the close tag are framing; an invoke runs to
    its ``</｜DSML｜invoke>`` (a call, or content) or to the close tag (content, cut off); other text
    is content up to the next invoke or the close tag. ``(end, calls or None[, next pseudo-mark])``;
    None on a stream's prefix that cannot decide it yet."""
    n = len(text)
    if mark == EOS:
        return s + len(mark), []
    if mark in CLOSE_OF:
        return s + len(mark), [], ITEMS_OF[CLOSE_OF[mark]]
    close = _CLOSE_OF_ITEMS[mark]
    pos = skip_ws(text, s)  # whitespace between items is framing: dropped with a call or a close tag
    if pos == n:
        return (n, []) if final else None
    if text.startswith(close, pos):
        return pos + len(close), []
    if text.startswith(INVOKE, pos):
        e, found = first_marker(text, _INVOKE_ENDS[close], pos + len(INVOKE))
        if e < 0:
            if not final:
                return None
            return (pos, [], mark) if pos > s else (n, None)
        end = e + len(INVOKE_CLOSE)
        call = None if found == close else parse_invoke(text[pos:end], types)
        if call is not None:
            return end, [ToolCall(*call)], mark
        if pos > s:
            return pos, [], mark  # drop the whitespace; the item is content from its start
        return (e, None, mark) if found == close else (end, None, mark)
    if not final and (close.startswith(text[pos:]) or INVOKE.startswith(text[pos:])):
        return None
    if pos > s:
        return pos, [], mark
    x, _ = first_marker(text, _TEXT_ENDS[close], pos + 1)
    if x < 0:
        return (n, None) if final else None
    return x, None, mark


class DeepSeekV32Parser(GrammarParser):
    """Tool parser for DeepSeek V3.2 (``<｜DSML｜function_calls>``) and V4 (``<｜DSML｜tool_calls>``).

    Mirrors vLLM ``DeepSeekV32ToolParser`` / ``DeepSeekV4ToolParser`` and SGLang
    ``DeepSeekV32Detector`` in syntax (tags, ``string`` flag, JSON-object invoke body); the rules
    for malformed output are this module's (see the module docstring). ``tools``: types
    ``string="false"`` values by the declared schema. ``reasoning_open=True``: the prompt opened
    ``<think>`` (thinking mode).
    """

    name: ClassVar[str] = "deepseek_v32"
    markers: ClassVar[tuple[str, ...]] = (DSML, EOS, *THINK)
    call_starts: ClassVar[tuple[str, ...]] = (FC_OPEN, TC_OPEN)  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = (EOS,)
    covers: ClassVar[str] = "deepseek-ai/DeepSeek-V3.2(-Exp, -Speciale) and DeepSeek-V4 (DSML tool calls)"
    STARTS = OUTSIDE
    THINK = THINK

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        self._types = declared_types(tools)
        super().__init__(tools, reasoning_open=reasoning_open)

    def read(self, text: str, s: int, mark: str, final: bool):  # type: ignore[override]
        return read_item(text, s, mark, self._types, final)

    def wake(self, mark: str) -> MarkerWake:
        """An item is read again when an invoke tag, an invoke's end or the block's close tag
        arrives."""
        close = _CLOSE_OF_ITEMS.get(mark)
        return MarkerWake((INVOKE, INVOKE_CLOSE, close) if close else (), 0)
