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

Streaming: the engine of :class:`~replay.parsers._family.GrammarParser` over the same grammar
(:func:`read_block`): text outside a block is emitted as soon as it cannot be the start of
``<tool_call>``; a block is read again when a ``</tool_call>`` arrives (or at ``finish()``) and its
call is sent once decided, in one tool-call delta (the name once, complete, and the arguments as
exactly the whole-text parse's string).

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

from replay.parsers._block import arguments_text, read_json_block
from replay.parsers._family import GrammarParser
from replay.parsers._reasoning import THINK
from replay.parsers.base import ToolCall

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


def read_block(text: str, s: int, mark: str, final: bool = True) -> tuple[int, list[ToolCall] | None] | None:
    """The grammar (:data:`~replay.parsers._family.Grammar`): the block at ``s`` -> ``(end, [call]
    or None)``; None on a stream's prefix that cannot decide it yet."""
    got = read_json_block(text, s + len(mark), END, final=final)
    if got is None:
        return None
    call = call_from_object(got[1])
    return got[0], None if call is None else [ToolCall(*call)]


class HermesParser(GrammarParser):
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
    STARTS = (START,)
    WAKE = (END,)
    THINK = THINK

    read = staticmethod(read_block)  # the grammar (:data:`~replay.parsers._family.Grammar`)
