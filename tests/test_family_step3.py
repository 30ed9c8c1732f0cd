"""Step-3 (``<｜tool_call_begin｜>`` + ``<steptml:invoke>`` XML): the property, the module's rules,
planted bugs.

The family's upstream cases (vLLM ``tests/tool_parsers/test_step3_tool_parser.py``) are
conformance data (``tests/conformance/vllm.jsonl``, ids ``vllm-step3-*``) and run in
tests/test_conformance.py; the family-wide properties (deep values, a 1 MB unterminated call) run
in tests/test_all_families.py from its ``SYNTAX`` entry. This file holds what is Step-3's own,
until the shared family suite takes a configuration.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from replay.parsers.base import ParseResult, ToolCall
from replay.parsers.step3 import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, SEP, Step3Parser
from replay.stream import check_stream_equals_whole
from strategies import PROPERTY, RawArgsFirst, SilentFinish, all_chunkings, assert_property, opened, stream

P = Step3Parser
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}},
        },
    }
]


def call(name: str, params: dict[str, str], *, header: str = "function" + SEP) -> str:
    body = "".join(f'<steptml:parameter name="{k}">{v}</steptml:parameter>' for k, v in params.items())
    return f'{CALL_BEGIN}{header}<steptml:invoke name="{name}">{body}</steptml:invoke>{CALL_END}'


def section(*calls: str) -> str:
    return CALLS_BEGIN + "".join(calls) + CALLS_END


# ----------------------------------------------------------------------------- 1. the property
_values = st.one_of(
    st.sampled_from(["Paris", " 3 ", "true", "null", '{"a": [1]}', "x<y", "", "\n", CALL_END[:4], "</steptml:invoke>"]),
    st.text(max_size=5),
)
_params = st.dictionaries(st.sampled_from(["city", "days", "q", ""]), _values, max_size=3)
_blocks = st.one_of(
    st.builds(lambda n, p: call(n, p), st.sampled_from(["get_weather", "f", ""]), _params),
    st.builds(lambda p: call("f", p, header=""), _params),
    st.builds(lambda p: call("f", p, header="action" + SEP), _params),
    st.builds(lambda c, k: c[:k], st.builds(lambda p: call("f", p), _params), st.integers(0, 80)),  # cut off
    st.sampled_from([CALLS_BEGIN, CALLS_END, SEP, CALL_END, "\n", "Sure. ", "<steptml:invoke", CALL_BEGIN + "junk" + CALL_END]),
)
outputs = st.lists(_blocks, max_size=5).map("".join)


@PROPERTY
@given(outputs, st.sampled_from(["plain", "typed", "open"]))
def test_step3_stream_equals_whole(text, mode):
    if mode == "plain":
        assert_property(P, text)
    elif mode == "typed":
        assert_property(P, text, tools=TOOLS)
    else:
        assert_property(opened(P), "reasoning</think>" + text)


# ----------------------------------------------------------------------------- 2. the rules
def test_section_calls_and_prose():
    text = "Checking. " + section(call("get_weather", {"city": "Paris", "days": "3"}), SEP, call("f", {})) + " Done."
    assert P(TOOLS).parse(text) == ParseResult(
        "Checking.  Done.", (ToolCall("get_weather", '{"city": "Paris", "days": 3}'), ToolCall("f", "{}"))
    )
    got = stream(P, [text[:20], text[20:61], text[61:]])
    assert [(c.name, json.loads(c.arguments)) for c in got.calls] == [("get_weather", {"city": "Paris", "days": 3}), ("f", {})]


def test_string_values_keep_whitespace_and_undeclared_values_are_json():
    text = section(call("get_weather", {"city": "  Paris \n", "days": " 4 ", "extra": " [1, 2] "}))
    (c,) = P(TOOLS).parse(text).calls
    assert json.loads(c.arguments) == {"city": "  Paris \n", "days": 4, "extra": [1, 2]}


def test_header_is_optional_but_must_be_function():
    assert P().parse(call("f", {"a": "1"}, header="")).calls == (ToolCall("f", '{"a": 1}'),)
    assert P().parse(call("f", {}, header="function" + SEP + "f\n")).calls == (ToolCall("f", "{}"),)
    bad = call("f", {}, header="action" + SEP)
    assert P().parse(bad) == ParseResult(bad)


def test_call_cut_off_and_malformed_blocks_are_content_verbatim():
    cut = CALLS_BEGIN + call("f", {"a": "1"})[: -len(CALL_END)]
    assert P().parse(cut) == ParseResult(cut[len(CALLS_BEGIN) :])
    bad = f'{CALL_BEGIN}<steptml:invoke name="f">stray text</steptml:invoke>{CALL_END}'
    assert P().parse("a" + bad + "b") == ParseResult("a" + bad + "b")


def test_a_value_with_a_call_end_marker_ends_the_block():
    """The block ends at the first ``<｜tool_call_end｜>`` (as SGLang's non-greedy regex): the value
    cannot contain it, so the block is malformed and content up to that marker."""
    text = call("f", {"a": "x" + CALL_END + "y"})
    got = P().parse(text)
    assert got.calls == () and got.content.startswith(CALL_BEGIN)


# ----------------------------------------------------------------------------- 3. planted bugs
class Step3RawArgs(RawArgsFirst, P):
    pass


class Step3SilentFinish(SilentFinish, P):
    pass


class Step3EarlyBlock(P):
    """Planted bug: the grammar decides a block on a prefix without its end marker (a guess)."""

    def read(self, text, s, mark, final):
        return super().read(text, s, mark, True)


def test_planted_bugs_are_caught():
    text = "Sure. " + section(call("f", {"a": "1"})) + " ok " + CALL_BEGIN[:3]  # held back until finish()
    assert_property(P, text)
    for planted in (Step3RawArgs, Step3SilentFinish, Step3EarlyBlock):
        assert check_stream_equals_whole(planted, text, all_chunkings(planted, text)), planted.__name__
