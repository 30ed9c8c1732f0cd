"""Hermes / Qwen2.5 / Qwen3 / QwQ tool calls: ``<tool_call>`` + JSON object + ``</tool_call>``.

Output syntax (tool-call-formats.md §1): each call is a block ``<tool_call>`` ws JSON ws
``</tool_call>`` where the JSON is ``{"name": <string>, "arguments": <object>}``; ``"parameters"``
is accepted as a synonym of ``"arguments"`` (SGLang's ``HermesDetector`` does). Several calls are
consecutive blocks, usually separated by a newline. ws is JSON whitespace (space, tab, LF, CR).

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

* The JSON after ``<tool_call>`` is read string-aware, as ``json.JSONDecoder().raw_decode`` reads
  it (SGLang's newer detector), so a ``</tool_call>`` inside an argument string does not end the
  call (the regex parsers of vLLM and SGLang's ``Qwen25Detector`` cut it there).
* A block is a tool call when its JSON is an object with a string ``name`` and an object
  ``arguments`` (else ``parameters``), and only whitespace follows it up to ``</tool_call>``.
  The call's arguments are ``json.dumps(arguments, ensure_ascii=False)``.
* A block that is not a call is content, verbatim, markers included, and parsing goes on after
  it. Its extent: when its JSON decodes, up to the first ``</tool_call>`` after the JSON value;
  when it does not, up to the first ``</tool_call>`` after the start marker; either way up to the
  end of the text when there is no such end marker. (vLLM instead turns the whole output into
  content on any error; SGLang stops at the first bad block.)
* A block with no ``</tool_call>`` at the end of the text (the stream stopped) is a call when its
  JSON is complete and a valid call followed only by whitespace, else its text is content.
* Content is all text outside call blocks, verbatim: nothing stripped, text after the last call
  kept, a stray ``</tool_call>`` kept.
* Reasoning: a leading ``<think>...</think>`` (or, with ``reasoning_open``, everything up to the
  first ``</think>``) is split off first, as :mod:`replay.parsers._reasoning` defines; a
  ``<tool_call>`` inside it is reasoning, not a call (Qwen3 thinking models).

Streaming: a buffered state machine. Outside a block it emits text as soon as it cannot be the
start of ``<tool_call>`` (a buffer suffix that is a prefix of the marker is held back). Inside a
block it buffers until the block is decided (end marker seen, or the JSON can no longer be a
value and the end marker is seen, or ``finish()``), then sends the call in one tool-call delta:
the name once, complete, and the arguments as exactly the whole-text parse's string.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from replay.parsers._block import JsonBlock
from replay.parsers._jsonscan import skip_ws
from replay.parsers._reasoning import THINK, ReasoningSplitter, split_reasoning
from replay.parsers.base import CallDelta, ParseResult, StreamDelta, ToolCall

START = "<tool_call>"
END = "</tool_call>"

_DECODER = json.JSONDecoder()


def call_from_object(obj: Any) -> tuple[str, str] | None:
    """``(name, arguments JSON text)`` when ``obj`` is a valid Hermes call object, else None.

    Valid: a dict with a ``str`` ``name`` and a dict ``arguments`` (or, when ``arguments`` is
    absent, a dict ``parameters``). Arguments are dumped with ``json.dumps(ensure_ascii=False)``.
    """
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    args = obj["arguments"] if "arguments" in obj else obj.get("parameters")
    if not isinstance(name, str) or not isinstance(args, dict):
        return None
    return name, json.dumps(args, ensure_ascii=False)


def partial_marker_suffix(buf: str, markers: tuple[str, ...]) -> int:
    """Length (chars) of the longest suffix of ``buf`` that is a proper prefix of a marker."""
    longest = max((len(m) for m in markers), default=1) - 1
    for k in range(min(len(buf), longest), 0, -1):
        tail = buf[-k:]
        if any(len(m) > k and m.startswith(tail) for m in markers):
            return k
    return 0


class HermesParser:
    """Tool parser for the Hermes ``<tool_call>`` JSON format (Hermes 2 Pro/3, Qwen2.5, Qwen3, QwQ).

    Mirrors vLLM ``Hermes2ProToolParser`` and SGLang ``HermesDetector`` in syntax; the rules for
    malformed output are this module's (see the module docstring). ``tools`` is accepted and
    ignored: calls to undeclared tools are reported as calls (SGLang drops them; an audit wants
    to see them).
    """

    name: ClassVar[str] = "hermes"
    covers: ClassVar[str] = "Hermes 2 Pro / 3, Qwen2.5, Qwen3 (incl. thinking), QwQ: <tool_call> JSON blocks"
    markers: ClassVar[tuple[str, ...]] = (START, END)

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        self.tools = tools
        self._reasoning_open = reasoning_open
        self._think = ReasoningSplitter(THINK, open=reasoning_open)
        self._buf = ""
        self._block: JsonBlock | None = None  # the open block's body, None outside a block
        self._index = 0  # OpenAI tool_calls[].index of the next call
        self._finished = False

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion) -> reasoning, content and calls, per the
        module rules (reasoning split off first, :mod:`replay.parsers._reasoning`)."""
        reasoning, body = split_reasoning(text, THINK, open=self._reasoning_open)
        result = self._parse_body(body)
        return ParseResult(content=result.content, calls=result.calls, reasoning=reasoning)

    def _parse_body(self, text: str) -> ParseResult:
        content: list[str] = []
        calls: list[ToolCall] = []
        n = len(text)
        pos = 0
        while True:
            s = text.find(START, pos)
            if s < 0:
                content.append(text[pos:])
                break
            content.append(text[pos:s])
            j = skip_ws(text, s + len(START))
            try:
                obj, k = _DECODER.raw_decode(text, j)
            except json.JSONDecodeError:
                e = text.find(END, j)
                end = n if e < 0 else e + len(END)
                content.append(text[s:end])
                pos = end
                continue
            m = skip_ws(text, k)
            if text.startswith(END, m):
                end = m + len(END)
                call = call_from_object(obj)
            elif m == n:
                end = n
                call = call_from_object(obj)
            else:
                e = text.find(END, k)
                end = n if e < 0 else e + len(END)
                call = None
            if call is None:
                content.append(text[s:end])
            else:
                calls.append(ToolCall(*call))
            pos = end
        return ParseResult(content="".join(content), calls=tuple(calls))

    # ---------------------------------------------------------------- streaming
    def feed(self, delta: str) -> StreamDelta:
        """Streaming parse: take the next delta (text); return content and tool-call deltas."""
        if self._finished:
            raise RuntimeError("feed() after finish(): construct a new parser per stream")
        reasoning, body = self._think.feed(delta)
        self._buf += body
        out = self._drain(final=False)
        out.reasoning = reasoning
        return out

    def finish(self) -> StreamDelta:
        """End of stream: decide the open block (if any), release held-back text."""
        if self._finished:
            return StreamDelta()
        reasoning, body = self._think.finish()
        self._buf += body
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
                i = self._buf.find(START)
                if i < 0:
                    keep = 0 if final else partial_marker_suffix(self._buf, (START,))
                    cut = len(self._buf) - keep
                    parts.append(self._buf[:cut])
                    self._buf = self._buf[cut:]
                    break
                parts.append(self._buf[:i])
                self._buf = self._buf[i:]
                self._block = JsonBlock(END, len(START))
            decided = self._block.advance(self._buf, final)
            if decided is None:
                break
            end, span = decided
            raw = "" if span is None else self._buf[span[0] : span[1]]
            call = None if span is None else call_from_object(json.loads(raw))
            if call is None:
                parts.append(self._buf[:end])
            else:
                out.calls.extend(self._emit_call(self._index, call[0], call[1], raw))
                self._index += 1
            self._buf = self._buf[end:]
            self._block = None
        out.content = "".join(parts)
        return out
