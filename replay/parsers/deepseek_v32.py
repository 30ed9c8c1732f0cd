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

Streaming: the reasoning splitter, then a buffered state machine over the body: outside a block
text is emitted as soon as it cannot start an open tag or the end-of-sentence token; inside a
block each invoke is buffered until its end tag (searched for only in new text) and its call is
sent in one tool-call delta (name once; arguments exactly the whole-text string).

End token ``<｜end▁of▁sentence｜>`` (``end_tokens``) is removed from the raw text in both paths.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from replay.parsers._family import StreamParser
from replay.parsers._jsonscan import TOO_DEEP, loads_or_too_deep, skip_ws
from replay.parsers._markers import find_marker, first_marker, partial_marker_suffix
from replay.parsers._reasoning import THINK, ReasoningSplitter, split_reasoning
from replay.parsers._schema import convert_value, declared_types
from replay.parsers.base import ParseResult, StreamDelta, ToolCall
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
        return (name, json.dumps(obj, ensure_ascii=False)) if isinstance(obj, dict) else None
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
    return name, json.dumps(args, ensure_ascii=False)


class DeepSeekV32Parser(StreamParser):
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

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        super().__init__(tools, ReasoningSplitter(THINK, open=reasoning_open))
        self._types = declared_types(tools)
        self._reasoning_open = reasoning_open
        self._state = "out"  # out -> items -> (invoke | stray) -> items ... -> out
        self._close = ""  # the open block's close tag
        self._seek = 0  # invoke/stray: where to search next (chars in _buf)

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion) -> reasoning, content and calls, per the
        module rules."""
        text = self.strip_end_tokens(text)
        reasoning, text = split_reasoning(text, THINK, open=self._reasoning_open)
        content: list[str] = []
        calls: list[ToolCall] = []
        n = len(text)
        pos = 0
        while pos < n:
            i, mark = first_marker(text, OUTSIDE, pos)
            if i < 0:
                content.append(text[pos:])
                break
            content.append(text[pos:i])
            pos = i + len(mark)
            if mark == EOS:
                continue
            close = CLOSE_OF[mark]
            while True:  # items of the block
                pos = skip_ws(text, pos)
                if pos == n:
                    break
                if text.startswith(close, pos):
                    pos += len(close)
                    break
                if text.startswith(INVOKE, pos):
                    e, found = first_marker(text, (INVOKE_CLOSE, close), pos + len(INVOKE))
                    if e < 0:
                        content.append(text[pos:])
                        pos = n
                        break
                    if found == close:
                        content.append(text[pos:e])
                        pos = e
                        continue
                    end = e + len(INVOKE_CLOSE)
                    call = parse_invoke(text[pos:end], self._types)
                    if call is None:
                        content.append(text[pos:end])
                    else:
                        calls.append(ToolCall(*call))
                    pos = end
                    continue
                x, _ = first_marker(text, (INVOKE, close), pos + 1)
                x = n if x < 0 else x
                content.append(text[pos:x])
                pos = x
        return ParseResult(content="".join(content), calls=tuple(calls), reasoning=reasoning)

    # ---------------------------------------------------------------- streaming
    def _drain(self, final: bool) -> StreamDelta:
        out = StreamDelta()
        parts: list[str] = []
        buf = self._buf
        pos = 0  # everything before pos has been handled
        while True:
            n = len(buf)
            state = self._state
            if state == "out":
                i, mark = find_marker(buf, OUTSIDE, final, pos)
                parts.append(buf[pos:i])
                pos = i + len(mark)
                if not mark:
                    break
                if mark != EOS:
                    self._close = CLOSE_OF[mark]
                    self._state = "items"
                continue
            close = self._close
            if state == "items":
                pos = skip_ws(buf, pos)
                if pos == n:
                    break
                if buf.startswith(close, pos):
                    pos += len(close)
                    self._state = "out"
                    continue
                if buf.startswith(INVOKE, pos):
                    self._state, self._seek = "invoke", pos + len(INVOKE)
                    continue
                rest = buf[pos:]
                if not final and (close.startswith(rest) or INVOKE.startswith(rest)):
                    break
                self._state, self._seek = "stray", pos + 1
                continue
            if state == "invoke":
                e, found = first_marker(buf, (INVOKE_CLOSE, close), self._seek)
                if e < 0:
                    if final:
                        parts.append(buf[pos:])
                        pos = n
                        break
                    self._seek = max(self._seek, n - max(len(INVOKE_CLOSE), len(close)) + 1)
                    break
                if found == close:
                    parts.append(buf[pos:e])
                    pos = e
                else:
                    end = e + len(INVOKE_CLOSE)
                    item = buf[pos:end]
                    call = parse_invoke(item, self._types)
                    if call is None:
                        parts.append(item)
                    else:
                        self._send(out, call[0], call[1], item)  # raw: the invoke's text
                    pos = end
                self._state = "items"
                continue
            # stray text inside a block
            x, _ = first_marker(buf, (INVOKE, close), self._seek)
            if x < 0:
                keep = 0 if final else partial_marker_suffix(buf[pos:], (INVOKE, close))
                cut = max(pos, n - keep)
                parts.append(buf[pos:cut])
                pos = cut
                self._seek = max(cut, pos)
                break
            parts.append(buf[pos:x])
            pos = x
            self._state = "items"
        self._buf = buf[pos:]
        if self._state in ("invoke", "stray"):
            self._seek -= pos
        out.content = "".join(parts)
        return out
