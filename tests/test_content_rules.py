"""The three content rules of issue 13 that the families disagreed on, as the content-rules
table of docs/parsers-and-serializers.md states them, each checked whole-text, streamed under every chunking of
:func:`strategies.all_chunkings`, and against the upstream behaviour that decides it.

* Harmony: text outside every message envelope is content, verbatim (SGLang's ``HarmonyParser``
  makes each text token outside a block a ``normal`` event and streams it as it is).
* DeepSeek V3.1 / Kimi K2: a block that is no call is content verbatim, markers included; a
  section holding no call is content verbatim, section markers included (the Hermes rule; SGLang's
  ``DeepSeekV31Detector`` returns the whole text on a bad block, and the whole-text parses of
  SGLang and vLLM keep a text without the section begin marker as it is).
* DeepSeek V3.1 / Kimi K2: a last call whose end marker never came is no call (SGLang's and
  vLLM's whole-text regexes match a call only up to ``<｜tool▁call▁end｜>`` /
  ``<|tool_call_end|>``). Harmony is the documented exception: ``<|call|>`` is a stop token the
  server strips from the text (llama.cpp's gpt-oss tests expect the call; vLLM parses token ids,
  which keep it), so a complete JSON body cut off by the end of the output is a call.
"""

from __future__ import annotations

import pytest

from replay.parsers.base import ParseResult, ToolCall
from replay.parsers.deepseek_v31 import CALL_BEGIN as D_CALL
from replay.parsers.deepseek_v31 import CALL_END as D_END
from replay.parsers.deepseek_v31 import CALLS_BEGIN as D_SEC
from replay.parsers.deepseek_v31 import CALLS_END as D_SEC_END
from replay.parsers.deepseek_v31 import SEP as D_SEP
from replay.parsers.deepseek_v3 import DeepSeekV3Parser
from replay.parsers.deepseek_v31 import DeepSeekV31Parser
from replay.parsers.harmony import HarmonyParser
from replay.parsers.kimi_k2 import ARG_BEGIN as K_ARG
from replay.parsers.kimi_k2 import CALL_BEGIN as K_CALL
from replay.parsers.kimi_k2 import CALL_END as K_END
from replay.parsers.kimi_k2 import SECTION_BEGIN as K_SEC
from replay.parsers.kimi_k2 import SECTION_END as K_SEC_END
from replay.parsers.kimi_k2 import KimiK2Parser
from replay.stream import replay_stream, split
from strategies import assert_property

HARMONY_CALL = '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>'


def _check(cls, text, expected: ParseResult):
    """``text`` parses to ``expected`` whole, streamed per char, and streamed == whole under every
    chunking."""
    assert cls().parse(text) == expected
    got = replay_stream(cls, None, split(text, "char", markers=cls.markers))
    assert got.content == expected.content
    assert [(c.name, c.arguments) for c in got.calls] == [(c.name, c.arguments) for c in expected.calls]
    assert_property(cls, text)


# ----------------------------------------------------------------------------- Harmony: text outside envelopes
def test_harmony_text_outside_envelopes_is_content_verbatim():
    """The issue's case: the text before and after the call message is content, its spaces kept
    (``I need both. `` + `` Done.``: two spaces)."""
    text = "I need both. " + HARMONY_CALL + " Done."
    _check(HarmonyParser, text, ParseResult("I need both.  Done.", (ToolCall("get_weather", '{"city": "Paris"}'),)))


@pytest.mark.parametrize(
    "text, content",
    [
        ("Hi<|end|><|start|>assistant<|channel|>final<|message|>ok", "Hiok"),  # text, then a terminator
        ("<|channel|>final<|message|>a<|end|>b", "ab"),  # after a message: text outside it
        ("<|channel|>final<|message|>a<|end|>b<|start|>assistant", "ab"),  # the trailing header is framing
        (" to=functions.f<|channel|>analysis<|message|>{}<|call|>", ""),  # text ended by <|channel|> is header
        ("<|channel|>final<|message|>a<|end|><|start|>user<|message|>x<|end|>", "a"),  # a user message is dropped
    ],
)
def test_harmony_outside_text_versus_header_text(text, content):
    """Text is outside every message when no ``<|start|>`` opened it and no ``<|channel|>`` /
    ``<|constrain|>`` / ``<|message|>`` follows it before a ``<|start|>``, a terminator or the end;
    otherwise it is a message header (framing)."""
    assert HarmonyParser().parse(text).content == content
    assert_property(HarmonyParser, text)


# ----------------------------------------------------------------------------- malformed blocks: verbatim, markers included
@pytest.mark.parametrize(
    "cls, text, content, calls",
    [
        # the issue's case: a section with no call block in it
        (DeepSeekV31Parser, f"{D_SEC}nonsense{D_SEC_END}", f"{D_SEC}nonsense{D_SEC_END}", ()),
        (KimiK2Parser, f"{K_SEC}nonsense{K_SEC_END}", f"{K_SEC}nonsense{K_SEC_END}", ()),
        # a block whose JSON is bad, alone in its section: the whole section verbatim
        (DeepSeekV31Parser, f"x{D_SEC}{D_CALL}f{D_SEP}{{bad}}{D_END}{D_SEC_END}y", f"x{D_SEC}{D_CALL}f{D_SEP}{{bad}}{D_END}{D_SEC_END}y", ()),
        (KimiK2Parser, f"x{K_SEC}{K_CALL}functions.f:0{K_ARG}{{bad}}{K_END}{K_SEC_END}y", f"x{K_SEC}{K_CALL}functions.f:0{K_ARG}{{bad}}{K_END}{K_SEC_END}y", ()),
        # a bad block beside a good one: the section frames a call, so its markers are dropped and
        # the bad block stays verbatim with its own markers (Kimi: the inner call markup is kept)
        (
            DeepSeekV31Parser,
            f"{D_SEC}{D_CALL}f{D_SEP}{{bad}}{D_END}{D_CALL}g{D_SEP}{{}}{D_END}{D_SEC_END}",
            f"{D_CALL}f{D_SEP}{{bad}}{D_END}",
            (ToolCall("g", "{}"),),
        ),
        (
            KimiK2Parser,
            f"{K_SEC}{K_CALL}functions.f:0{K_ARG}{{bad}}{K_END}{K_CALL}functions.g:1{K_ARG}{{}}{K_END}{K_SEC_END}",
            f"{K_CALL}functions.f:0{K_ARG}{{bad}}{K_END}",
            (ToolCall("g", "{}"),),
        ),
        # a Kimi block whose ID is no functions.NAME:IDX
        (KimiK2Parser, f"{K_SEC}{K_CALL}nope{K_ARG}{{}}{K_END}{K_SEC_END}", f"{K_SEC}{K_CALL}nope{K_ARG}{{}}{K_END}{K_SEC_END}", ()),
        # a stray section end with no section open frames nothing: verbatim (SGLang's test_invalid_tool_call)
        (KimiK2Parser, f"invalid_tool:0{K_ARG}{{}}{K_END}{K_SEC_END}", f"invalid_tool:0{K_ARG}{{}}{K_END}{K_SEC_END}", ()),
    ],
)
def test_malformed_block_is_content_verbatim(cls, text, content, calls):
    _check(cls, text, ParseResult(content, calls))


def test_well_formed_section_markers_are_framing():
    """A section holding calls never leaks its markers, nor the text between calls is lost."""
    d = f"a{D_SEC}{D_CALL}f{D_SEP}{{}}{D_END}\n{D_CALL}g{D_SEP}{{}}{D_END}{D_SEC_END}b"
    _check(DeepSeekV31Parser, d, ParseResult("a\nb", (ToolCall("f", "{}"), ToolCall("g", "{}"))))
    k = f"a{K_SEC}{K_CALL}functions.f:0{K_ARG}{{}}{K_END} {K_CALL}functions.g:1{K_ARG}{{}}{K_END}{K_SEC_END}b"
    _check(KimiK2Parser, k, ParseResult("a b", (ToolCall("f", "{}"), ToolCall("g", "{}"))))


# ----------------------------------------------------------------------------- a call cut off by the end of the output
@pytest.mark.parametrize(
    "cls, text",
    [
        (DeepSeekV31Parser, f"ok{D_SEC}{D_CALL}f{D_SEP}{{\"a\": 1}}"),
        (DeepSeekV31Parser, f"ok{D_SEC}{D_CALL}f{D_SEP}{{\"a\": 1}}  "),
        (KimiK2Parser, f"ok{K_SEC}{K_CALL}functions.f:0{K_ARG}{{\"a\": 1}}"),
        (DeepSeekV31Parser, f"{D_CALL}f{D_SEP}{{\"a\": 1}}"),  # a bare call, no section
        (DeepSeekV3Parser, f"{D_SEC}{D_CALL}function{D_SEP}f\n```json\n{{\"a\": 1}}\n"),  # V3: no fence, no end token
        (KimiK2Parser, f"{K_CALL}functions.f:0{K_ARG}{{\"a\": 1}}"),
    ],
)
def test_call_without_end_marker_is_no_call(cls, text):
    """The JSON is complete but the end marker never came: no call, the text verbatim."""
    _check(cls, text, ParseResult(text, ()))


def test_earlier_closed_calls_stay_when_the_last_is_cut_off():
    text = f"{D_SEC}{D_CALL}f{D_SEP}{{}}{D_END}{D_CALL}g{D_SEP}{{\"a\": 1}}"
    _check(DeepSeekV31Parser, text, ParseResult(f"{D_CALL}g{D_SEP}{{\"a\": 1}}", (ToolCall("f", "{}"),)))


def test_harmony_call_without_call_token_is_a_call():
    """The documented exception: ``<|call|>`` is a stop token the server strips, so a call body
    whose JSON is complete at the end of the output is a call; one cut inside the JSON is not."""
    cut = HARMONY_CALL[: -len("<|call|>")]
    _check(HarmonyParser, "Checking. " + cut, ParseResult("Checking. ", (ToolCall("get_weather", '{"city": "Paris"}'),)))
    half = cut[: -len('"}')]
    _check(HarmonyParser, "Checking. " + half, ParseResult('Checking. {"city":"Paris', ()))
