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
* A block is a tool call when its JSON is an object with a string ``name`` and an object or a
  string ``arguments`` (else ``parameters``), and only whitespace follows it up to
  ``</tool_call>``. The call's arguments are ``json.dumps(arguments, ensure_ascii=False)``; a
  string ``arguments`` (the model serialized them: Granite 4 does) is the object it holds when
  it is an object's JSON text (vLLM decodes it), else the string's own JSON text (vLLM reports
  such a call; replay once made the whole block content, losing the call). A value nested deeper
  than :data:`~replay.parsers._jsonscan.MAX_DEPTH` is not a call (its extent is still found).
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

Choices where the upstream suites differ (tests/conformance, ``KNOWN`` in tests/test_conformance.py):

* Calls to tools the request does not declare: SGLang (``HermesDetector``) and TensorRT-LLM
  (``Qwen3ToolParser``) drop them; vLLM reports them; replay reports them, because an audit must
  see a model calling a tool that does not exist.
* llama.cpp's Hermes reader also accepts ``<function=NAME>{...}</function>``, ``<tool>``,
  ``<tools>``, ``<response>``, ``<json>``, ``<xml>`` wrappers and fenced or bare JSON objects;
  vLLM and SGLang read ``<tool_call>`` only; replay reads the family's ``<tool_call>`` syntax only
  (the chat templates of the models it covers emit nothing else, and a bare JSON object in prose
  is prose).
* End tokens (``end_tokens``): ``<|im_end|>``, ``<|endoftext|>`` (Qwen, ChatML Hermes),
  ``<|eot_id|>``, ``<|end_of_text|>`` (Hermes 3 on Llama) are removed from the raw text in both
  paths, as a server never shows them (a stop token ends the text; skipped special tokens are not
  decoded).
"""

from __future__ import annotations

from typing import Any, ClassVar

from replay.parsers._block import JsonBlock, arguments_text, read_json_block
from replay.parsers._family import StreamParser, parse_blocks
from replay.parsers._markers import find_marker
from replay.parsers._reasoning import THINK, ReasoningSplitter, split_reasoning
from replay.parsers.base import ParseResult, StreamDelta, ToolCall

START = "<tool_call>"
END = "</tool_call>"


def call_from_object(obj: Any) -> tuple[str, str] | None:
    """``(name, arguments JSON text)`` when ``obj`` is a valid Hermes call object, else None.

    Valid: a dict with a ``str`` ``name`` and ``arguments`` (or, when ``arguments`` is absent,
    ``parameters``) that is an object or a string; the arguments text is
    :func:`replay.parsers._block.arguments_text` (a string holding a JSON object is that object,
    any other string its own JSON text: a call either way, as vLLM reports it).
    """
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    args = arguments_text(obj["arguments"] if "arguments" in obj else obj.get("parameters"))
    if not isinstance(name, str) or args is None:
        return None
    return name, args


def _read_block(text: str, s: int, mark: str) -> tuple[int, list[ToolCall] | None]:
    """Whole text: the block at ``s`` -> ``(end, [call] or None)``."""
    end, obj = read_json_block(text, s + len(mark), END)
    call = call_from_object(obj)
    return end, None if call is None else [ToolCall(*call)]


class HermesParser(StreamParser):
    """Tool parser for the Hermes ``<tool_call>`` JSON format (Hermes 2 Pro/3, Qwen2.5, Qwen3, QwQ).

    Mirrors vLLM ``Hermes2ProToolParser`` and SGLang ``HermesDetector`` in syntax; the rules for
    malformed output are this module's (see the module docstring). ``tools`` is accepted and
    ignored: calls to undeclared tools are reported as calls (SGLang drops them; an audit wants
    to see them).
    """

    name: ClassVar[str] = "hermes"
    covers: ClassVar[str] = "Hermes 2 Pro / 3, Qwen2.5, Qwen3 (incl. thinking), QwQ: <tool_call> JSON blocks"
    markers: ClassVar[tuple[str, ...]] = (START, END)
    call_starts: ClassVar[tuple[str, ...]] = (START,)  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>")

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        super().__init__(tools, ReasoningSplitter(THINK, open=reasoning_open))
        self._reasoning_open = reasoning_open
        self._block: JsonBlock | None = None  # the open block's body, None outside a block

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion) -> reasoning, content and calls, per the
        module rules (reasoning split off first, :mod:`replay.parsers._reasoning`)."""
        text = self.strip_end_tokens(text)
        reasoning, text = split_reasoning(text, THINK, open=self._reasoning_open)
        content, calls = parse_blocks(text, (START,), _read_block)
        return ParseResult(content=content, calls=tuple(calls), reasoning=reasoning)

    # ---------------------------------------------------------------- streaming
    def _drain(self, final: bool) -> StreamDelta:
        out = StreamDelta()
        parts: list[str] = []
        while True:
            if self._block is None:
                i, mark = find_marker(self._buf, (START,), final)
                parts.append(self._buf[:i])
                self._buf = self._buf[i:]
                if not mark:
                    break
                self._block = JsonBlock(END, len(START))
            decided = self._block.advance(self._buf, final)
            if decided is None:
                break
            raw, obj = decided.value(self._buf)
            call = call_from_object(obj)
            if call is None:
                parts.append(self._buf[: decided.end])
            else:
                self._send(out, call[0], call[1], raw)
            self._buf = self._buf[decided.end :]
            self._block = None
        out.content = "".join(parts)
        return out
