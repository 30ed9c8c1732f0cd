"""IBM Granite tool calls: Granite 3.x ``<|tool_call|>[JSON list]`` and Granite 4 ``<tool_call>`` JSON.

Two parsers, because the two generations write different syntaxes (tool-call-formats.md §13) and
vLLM registers them separately (``--tool-call-parser granite`` and ``granite4``):

**Granite 3.x** (:class:`GraniteParser`, name ``granite``): ``<|tool_call|>`` (a special token in
3.0; vLLM notes that 3.1 may write the plain string ``<tool_call>``) followed by one JSON **array**
``[{"name": ..., "arguments": {...}}, ...]``; no end marker. Granite 3.2/3.3 thinking mode (the
granite-3.3 template's system text) writes ``<think>...</think><response>...</response>``.

Checked against public implementations (facts only): vLLM ``GraniteToolParser`` strips the output,
then a leading ``<|tool_call|>`` or ``<tool_call>``, requires the rest to start with ``[`` and
``json.loads`` it whole (so text after the array makes the output content); anything else, or any
error, makes the whole output content; ``arguments`` is required. llama.cpp's Granite handler
splits ``<think>`` and strips the ``<response>`` wrapper. vLLM's ``granite`` reasoning parser
instead looks for "Here is my thought process:" / "Here is my response:" (Granite 3.2 prose
markers): not handled here.

Reference behaviour of :class:`GraniteParser` (shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

1. Reasoning: a leading ``<think>...</think>`` (with ``reasoning_open``, everything up to the first
   ``</think>``) is split off by :mod:`replay.parsers._reasoning`. Then, when what remains starts
   (after whitespace) with ``<response>``, that wrapper is removed by the same rule with the tags
   ``<response>``/``</response>``: the text inside and the text after ``</response>`` (whitespace
   after the end tag dropped) are joined; an unclosed ``<response>`` runs to the end.
2. A **block** starts at each ``<|tool_call|>`` or ``<tool_call>`` (anywhere: vLLM requires it at
   the start of the output; text before it is content here) and its span runs to the next start
   marker of either kind or to the end of the text.
3. The JSON after the marker (after JSON whitespace) is read string-aware
   (``json.JSONDecoder().raw_decode``). The block is a call block when that value is followed
   only by whitespace up to the next start marker or the end, and is a non-empty list of objects
   each with a string ``name`` and an object ``arguments`` (vLLM's requirements; extra keys such
   as ``id`` ignored). Each item is one call; its arguments are ``json.dumps(arguments,
   ensure_ascii=False)``. A value nested too deeply for Python's ``json`` is never a call.
4. A block that is not a call block is content, verbatim, marker included. Its extent: up to the
   first start marker after the JSON value when the value decodes, after the JSON start when it
   does not (or only whitespace follows the marker), or the end of the text. (vLLM turns the whole
   output into content.)
5. Content is all other text verbatim; the whitespace between a call block's array and the next
   marker or the end belongs to the block. ``tools`` is accepted and ignored.

Streaming: reasoning and response splitters, then a buffered state machine: outside a block text
is emitted unless it may be the start of a start marker; a block is scanned incrementally
(:class:`SpanBlock`) and decided at the next start marker, when it can no longer be a call block
and a start marker follows, or at ``finish()`` -- so a call block at the end of the output is
reported by ``finish()`` (more text could still make it content). Each call is sent in one
tool-call delta: name once, complete, arguments exactly the whole-text string.

**Granite 4** (:class:`Granite4Parser`, name ``granite4``): Hermes-style blocks
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` with text allowed around them (the
granite-4.0/4.1 templates instruct exactly this). It is :class:`~replay.parsers.hermes.HermesParser`
under another name, with Hermes's rules for malformed output; vLLM ``Granite4ToolParser`` differs:
any malformed block (two starts in a row, end without start, empty or unterminated call) turns the
whole output into content, and it has no ``parameters`` synonym.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, NamedTuple

from replay.parsers._jsonscan import DONE, MORE, JsonPrefix, skip_ws
from replay.parsers._reasoning import THINK, ReasoningSplitter, split_reasoning
from replay.parsers.base import CallDelta, ParseResult, StreamDelta, ToolCall
from replay.parsers.hermes import HermesParser
from replay.parsers.mistral import decode_at, loads_or_too_deep

TOOL_CALL = "<|tool_call|>"
TOOL_CALL_PLAIN = "<tool_call>"
STARTS = (TOOL_CALL, TOOL_CALL_PLAIN)
RESPONSE = ("<response>", "</response>")
_LONGEST = max(len(m) for m in STARTS)


def first_marker(text: str, markers: tuple[str, ...], start: int) -> tuple[int, str]:
    """``(index, marker)`` of the earliest occurrence of any of ``markers`` in ``text`` at or
    after ``start`` (chars); ``(-1, "")`` when there is none."""
    best, found = -1, ""
    for m in markers:
        i = text.find(m, start)
        if i >= 0 and (best < 0 or i < best):
            best, found = i, m
    return best, found


def partial_suffix(buf: str, markers: tuple[str, ...]) -> int:
    """Length (chars) of the longest suffix of ``buf`` that is a proper prefix of one of ``markers``."""
    for k in range(min(len(buf), _LONGEST - 1), 0, -1):
        tail = buf[-k:]
        if any(len(m) > k and m.startswith(tail) for m in markers):
            return k
    return 0


def calls_from_value(obj: Any) -> list[tuple[str, str]] | None:
    """``[(name, arguments JSON text)]`` when ``obj`` is a non-empty list of Granite call objects
    (dicts with a ``str`` ``name`` and a dict ``arguments``), else None."""
    if not isinstance(obj, list) or not obj:
        return None
    out: list[tuple[str, str]] = []
    for item in obj:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        if not isinstance(item.get("arguments"), dict):
            return None
        out.append((item["name"], json.dumps(item["arguments"], ensure_ascii=False)))
    return out


class Decided(NamedTuple):
    """A decided span: ``end`` is the index (chars, in the parser's buffer) where the block ends
    (the start of the next marker, or the buffer's end); ``span`` is ``(start, end)`` of the JSON
    value when the block has the shape ws, one JSON value, ws, else None."""

    end: int
    span: tuple[int, int] | None


class SpanBlock:
    """Incremental decision on one block whose span ends *before* the next of several markers.

    Like :class:`replay.parsers._block.JsonBlock` (ws, one JSON value, ws, then an end marker), but
    the block ends at the first of ``ends`` (which is not consumed: it starts the next block) or at
    the end of the stream. ``body_start``: buffer index (chars) where the body begins. The parser
    calls :meth:`advance` with its whole growing buffer (indices stable until decided) and
    ``final``; it returns None while undecided, else a :class:`Decided`:

    * value complete, then ws, then one of ``ends`` (or, at ``final``, the end): ``span`` the value;
    * otherwise ``span`` None and ``end`` at the first of ``ends`` after the value (after the value's
      start when it does not decode), or ``len(buf)`` at ``final`` when there is none.

    The JSON is scanned once; markers are searched for only in new text.
    """

    def __init__(self, ends: tuple[str, ...], body_start: int) -> None:
        self.ends = ends
        self._longest = max(len(e) for e in ends)
        self._phase = "pre"
        self._scan = JsonPrefix()
        self._fed = body_start
        self._j = body_start
        self._k = 0
        self._seek = 0

    def advance(self, buf: str, final: bool) -> Decided | None:
        """Move on over ``buf``; None while undecided, else the block's :class:`Decided`."""
        if self._phase == "pre":
            j = skip_ws(buf, self._j)
            if j == len(buf):
                return Decided(len(buf), None) if final else None
            self._j = self._fed = j
            self._phase = "json"
        if self._phase == "json":
            status = self._scan.feed(buf[self._fed :])
            self._fed = len(buf)
            if status == MORE and final:
                status = self._scan.close()
            if status == MORE:
                return None
            if status == DONE:
                assert self._scan.end is not None
                self._k = self._j + self._scan.end
                self._phase = "post"
            else:
                self._seek = self._j
                self._phase = "seek"
        if self._phase == "post":
            m = skip_ws(buf, self._k)
            if any(buf.startswith(e, m) for e in self.ends):
                return Decided(m, (self._j, self._k))
            if m == len(buf):
                return Decided(len(buf), (self._j, self._k)) if final else None
            if not final and any(e.startswith(buf[m:]) for e in self.ends):
                return None
            self._seek = self._k
            self._phase = "seek"
        e, _ = first_marker(buf, self.ends, self._seek)
        if e < 0:
            if final:
                return Decided(len(buf), None)
            self._seek = max(self._seek, len(buf) - self._longest + 1)
            return None
        return Decided(e, None)


class GraniteParser:
    """Tool parser for Granite 3.x (``<|tool_call|>`` + JSON list), with ``<think>`` reasoning and
    the ``<response>`` wrapper of Granite 3.3 thinking mode.

    Mirrors vLLM ``GraniteToolParser`` in syntax; deliberate differences (module docstring): the
    marker may follow content, several blocks are read, a malformed block is content while well-formed
    ones stay calls. ``tools`` is accepted and ignored. ``reasoning_open=True``: the prompt opened
    ``<think>``.
    """

    name: ClassVar[str] = "granite"
    covers: ClassVar[str] = "IBM Granite 3.0-3.3 instruct (<|tool_call|> + JSON list; 3.3 <think>/<response>)"
    markers: ClassVar[tuple[str, ...]] = (TOOL_CALL, TOOL_CALL_PLAIN, *THINK, *RESPONSE)

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        self.tools = tools
        self._reasoning_open = reasoning_open
        self._think = ReasoningSplitter(THINK, open=reasoning_open)
        self._response = ReasoningSplitter(RESPONSE)
        self._buf = ""
        self._block: SpanBlock | None = None
        self._index = 0
        self._finished = False

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion) -> content, calls and reasoning, per the
        module rules. Never raises on malformed output."""
        reasoning, body = split_reasoning(text, THINK, open=self._reasoning_open)
        inside, after = split_reasoning(body, RESPONSE)
        text = inside + after
        content: list[str] = []
        calls: list[ToolCall] = []
        n = len(text)
        pos = 0
        while True:
            s, mark = first_marker(text, STARTS, pos)
            if s < 0:
                content.append(text[pos:])
                break
            content.append(text[pos:s])
            j = skip_ws(text, s + len(mark))
            if j == n:
                content.append(text[s:])
                break
            try:
                obj, k = decode_at(text, j)
            except json.JSONDecodeError:
                e, _ = first_marker(text, STARTS, j)
                end = n if e < 0 else e
                content.append(text[s:end])
                pos = end
                continue
            m = skip_ws(text, k)
            if m == n or any(text.startswith(x, m) for x in STARTS):
                end = m
                found = calls_from_value(obj)
            else:
                e, _ = first_marker(text, STARTS, k)
                end = n if e < 0 else e
                found = None
            if found is None:
                content.append(text[s:end])
            else:
                calls.extend(ToolCall(nm, args) for nm, args in found)
            pos = end
        return ParseResult(content="".join(content), calls=tuple(calls), reasoning=reasoning)

    # ---------------------------------------------------------------- streaming
    def feed(self, delta: str) -> StreamDelta:
        """Streaming parse: take the next delta (text); return the content, tool-call and
        reasoning fragments it completes. Raises RuntimeError after :meth:`finish`."""
        if self._finished:
            raise RuntimeError("feed() after finish(): construct a new parser per stream")
        reasoning, body = self._think.feed(delta)
        inside, after = self._response.feed(body)
        self._buf += inside + after
        out = self._drain(final=False)
        out.reasoning = reasoning
        return out

    def finish(self) -> StreamDelta:
        """End of stream: decide the open block (its calls, if valid, are reported here), release
        held-back text. A second call returns an empty delta."""
        if self._finished:
            return StreamDelta()
        reasoning, body = self._think.finish()
        inside, after = self._response.feed(body)
        inside2, after2 = self._response.finish()
        self._buf += inside + after + inside2 + after2
        out = self._drain(final=True)
        out.reasoning = reasoning
        self._finished = True
        return out

    def _emit_call(self, index: int, name: str, arguments: str, raw: str) -> list[CallDelta]:
        """The tool-call deltas sent for one decided call (``raw``: the model's JSON text)."""
        return [CallDelta(index=index, name=name, arguments=arguments)]

    def _drain(self, final: bool) -> StreamDelta:
        out = StreamDelta()
        parts: list[str] = []
        while True:
            if self._block is None:
                i, mark = first_marker(self._buf, STARTS, 0)
                if i < 0:
                    keep = 0 if final else partial_suffix(self._buf, STARTS)
                    cut = len(self._buf) - keep
                    parts.append(self._buf[:cut])
                    self._buf = self._buf[cut:]
                    break
                parts.append(self._buf[:i])
                self._buf = self._buf[i:]
                self._block = SpanBlock(STARTS, len(mark))
            decided = self._block.advance(self._buf, final)
            if decided is None:
                break
            end, span = decided
            raw = "" if span is None else self._buf[span[0] : span[1]]
            found = None if span is None else calls_from_value(loads_or_too_deep(raw))
            if found is None:
                parts.append(self._buf[:end])
            else:
                for name, args in found:
                    out.calls.extend(self._emit_call(self._index, name, args, raw))
                    self._index += 1
            self._buf = self._buf[end:]
            self._block = None
        out.content = "".join(parts)
        return out


class Granite4Parser(HermesParser):
    """Tool parser for Granite 4.x: Hermes-style ``<tool_call>{"name", "arguments"}</tool_call>``
    blocks with text around them.

    The syntax and the malformed-output rules are :class:`~replay.parsers.hermes.HermesParser`'s
    (which it is, under another name; ``<think>`` reasoning is split as there, harmless for Granite
    4 which does not reason). Mirrors vLLM ``Granite4ToolParser`` in syntax; vLLM differs on
    malformed output (the whole output becomes content) and has no ``parameters`` synonym.
    """

    name: ClassVar[str] = "granite4"
    covers: ClassVar[str] = "IBM Granite 4.0 / 4.1 (<tool_call> JSON </tool_call>, as Hermes)"
