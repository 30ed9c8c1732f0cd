"""ByteDance Seed-OSS tool calls: ``<seed:tool_call><function=NAME><parameter=K>V</parameter></function></seed:tool_call>``.

Output syntax (the Seed-OSS chat template, corpus ``chat_templates/llama.cpp/ByteDance-Seed-OSS.jinja``;
not described in tool-call-formats.md, so checked against vLLM and SGLang, see below)::

    <seed:think>reasoning ...</seed:think>
    <seed:tool_call>
    <function=get_weather>
    <parameter=city>Paris</parameter>
    </function>
    </seed:tool_call>

Values are raw text, usually written right after ``>`` with no newline (the template renders
history as ``<parameter=K>`` + value + ``</parameter>``). Reasoning is a leading
``<seed:think>...</seed:think>`` section (``<seed:cot_budget_reflect>`` notes may appear inside
it; they are reasoning text).

The grammar and the reference rules for malformed, unterminated and cut-off output are those of
:mod:`replay.parsers._xmlcall` (shared with Qwen3-Coder): block = ``<seed:tool_call>`` .. first
``</seed:tool_call>``; a call only when the block is exactly ``<function=NAME>`` + parameters +
``</function>`` (ws around) with the end tag or the end of the text after it; a bad or cut-off
block is content verbatim; a value ends at ``</parameter>``, ``<parameter=`` or ``</function>``;
one ``\\n`` stripped on each side, then typed with :mod:`replay.parsers._schema`. Reasoning is
split off first with :mod:`replay.parsers._reasoning` using ``<seed:think>``/``</seed:think>``.

Checked against public implementations (facts only): vLLM ``SeedOssToolParser``
(``vllm/tool_parsers/seed_oss_tool_parser.py``, adapted from its Qwen3-Coder parser) and SGLang
``SeedOssDetector`` (``python/sglang/srt/function_call/seed_oss_detector.py``): block tags
``<seed:tool_call>``/``</seed:tool_call>`` (vLLM requires both to be vocabulary tokens), think tags
``<seed:think>``/``</seed:think>``, inner grammar ``<function=NAME>``, ``<parameter=KEY>``,
``</parameter>``, ``</function>``; one leading and one trailing ``\\n`` removed from a value; a
value with no ``</parameter>`` runs to the end of its function; ``null`` (any case) is null for
any type. Deliberate differences: there a missing ``</parameter>`` swallows the next parameter
(their regex is ``<parameter=(.*?)</parameter>|<parameter=(.*?)$``); here the next
``<parameter=`` ends the value, as for Qwen3-Coder. Upstream reports a function cut off by the
end of the stream as a call and accepts ``<function=`` outside a block (vLLM); here those are
content. vLLM's whole-text path keeps the reasoning in the content (its reasoning parser
splits it); here it is reasoning. Typing follows ``_schema.py``.

End token ``<seed:eos>`` (``end_tokens``) is removed from the raw text in both paths.
"""

from __future__ import annotations

from typing import ClassVar

from replay.parsers._xmlcall import XmlCallParser

START = "<seed:tool_call>"
END = "</seed:tool_call>"
THINK_TAGS = ("<seed:think>", "</seed:think>")


class SeedOssParser(XmlCallParser):
    """Tool parser for ByteDance Seed-OSS (``<seed:tool_call>`` XML calls, ``<seed:think>``).

    ``SeedOssParser(tools=None, *, reasoning_open=False)``; ``parse(text) -> ParseResult``,
    ``feed(delta) -> StreamDelta``, ``finish() -> StreamDelta`` (see
    :class:`replay.parsers._xmlcall.XmlCallParser`). Mirrors vLLM ``SeedOssToolParser`` and SGLang
    ``SeedOssDetector`` in syntax; the malformed-output rules are :mod:`replay.parsers._xmlcall`'s
    (this module's docstring lists the differences).
    """

    name: ClassVar[str] = "seed_oss"
    markers: ClassVar[tuple[str, ...]] = (START, END, *THINK_TAGS)
    end_tokens: ClassVar[tuple[str, ...]] = ("<seed:eos>",)
    covers: ClassVar[str] = "ByteDance Seed-OSS-36B (Base/Instruct) <seed:tool_call> XML calls with <seed:think> reasoning"
    START: ClassVar[str] = START
    END: ClassVar[str] = END
    THINK: ClassVar[tuple[str, str]] = THINK_TAGS
    STARTS = (START,)
    WAKE = (END,)
