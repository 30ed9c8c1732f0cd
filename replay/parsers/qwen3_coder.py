"""Qwen3-Coder XML tool calls: ``<tool_call><function=NAME><parameter=K>V</parameter></function></tool_call>``.

Output syntax (tool-call-formats.md §2)::

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    </function>
    </tool_call>

Several calls are consecutive blocks separated by ``\\n``; content may precede them. Values are
raw text (the template writes strings as they are and objects/arrays with ``tojson``, each with a
``\\n`` on both sides), typed back by the request's declared schema. The same syntax is produced
by the Qwen3.5, NVIDIA Nemotron 3 Nano and StepFun Step-3.5 Flash templates (llama.cpp
``models/templates``; corpus ``qwen3_coder_xml.jsonl``); those models reason in
``<think>...</think>`` first, often with ``<think>`` in the generation prompt
(``reasoning_open=True``).

The grammar and the reference rules for malformed, unterminated and cut-off output are those of
:mod:`replay.parsers._xmlcall` (shared with Seed-OSS): block = START .. first END; a call only
when the block is exactly ``<function=NAME>`` + parameters + ``</function>`` (ws around), with
END or the end of the text after it; a bad or cut-off block is content verbatim; a parameter
value ends at ``</parameter>``, ``<parameter=`` or ``</function>``; one ``\\n`` stripped on each
side, then typed with :mod:`replay.parsers._schema`. Reasoning is split off first with
:mod:`replay.parsers._reasoning` (``<think>``/``</think>``).

Checked against public implementations (facts only): vLLM ``Qwen3CoderToolParser``
(``vllm/tool_parsers/qwen3coder_tool_parser.py``) and SGLang ``Qwen3CoderDetector``
(``python/sglang/srt/function_call/qwen3_coder_detector.py``): same tags; both strip one leading
and one trailing newline of a value; SGLang's parameter regex ends a value at ``</parameter>``,
the next ``<parameter=`` or ``</function>`` (followed here). Deliberate differences: upstream
accepts ``<function=...>`` without ``<tool_call>``, reports a function cut off by the end of the
stream as a call with the parameters seen so far, and reports every ``<function=`` of a block;
here those are content. vLLM's newer parser treats the closing tags as structural only at line
start (so code values may contain them); here the first tag ends the value, as in SGLang.
Typing follows ``_schema.py`` (undeclared parameters are JSON-decoded when they are JSON, where
vLLM/SGLang keep the raw string).

Choices where the upstream suites differ (tests/conformance, ``KNOWN`` in tests/test_conformance.py):

* vLLM's ``Qwen3CoderToolParser`` (and its engine variant) falls back to ``<function=NAME>``
  blocks written without ``<tool_call>``; SGLang's ``Qwen3CoderDetector`` needs ``<tool_call>``;
  replay follows SGLang: the chat template always writes ``<tool_call>``, and ``<function=``
  alone in prose (code, docs) is more often text than a call.
* Text parameters are typed by the shared rule of :mod:`replay.parsers._schema` (``null`` is None
  whatever the type; type names by prefix), in both paths.
* End tokens ``<|im_end|>``, ``<|endoftext|>`` are removed from the raw text in both paths.
"""

from __future__ import annotations

from typing import ClassVar

from replay.parsers._xmlcall import XmlCallParser

START = "<tool_call>"
END = "</tool_call>"
THINK_TAGS = ("<think>", "</think>")


class Qwen3CoderParser(XmlCallParser):
    """Tool parser for the Qwen3-Coder XML format (also Qwen3.5, Nemotron 3 Nano, StepFun 3.5).

    ``Qwen3CoderParser(tools=None, *, reasoning_open=False)``; ``parse(text) -> ParseResult``,
    ``feed(delta) -> StreamDelta``, ``finish() -> StreamDelta`` (see
    :class:`replay.parsers._xmlcall.XmlCallParser`). Mirrors vLLM ``Qwen3CoderToolParser`` and
    SGLang ``Qwen3CoderDetector`` in syntax; the malformed-output rules are
    :mod:`replay.parsers._xmlcall`'s (module docstring lists the differences). Calls to
    undeclared tools are reported (their values typed by the JSON fallback).
    """

    name: ClassVar[str] = "qwen3_coder"
    markers: ClassVar[tuple[str, ...]] = (START, END, *THINK_TAGS)
    end_tokens: ClassVar[tuple[str, ...]] = ("<|im_end|>", "<|endoftext|>")
    covers: ClassVar[str] = (
        "Qwen3-Coder (30B-A3B, 480B-A35B, Next), Qwen3.5, NVIDIA Nemotron 3 Nano, StepFun Step-3.5 Flash "
        "(<tool_call><function=..><parameter=..> XML, <think> reasoning)"
    )
    START: ClassVar[str] = START
    END: ClassVar[str] = END
    THINK: ClassVar[tuple[str, str]] = THINK_TAGS
    STARTS = (START,)
    WAKE = (END,)
