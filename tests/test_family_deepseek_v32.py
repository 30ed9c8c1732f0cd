"""DeepSeek V3.2 / V4 DSML tool parser: stream-equals-whole property, exact examples, planted bugs, corpus."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replay.parsers.base import CallDelta, ParseResult, ToolCall
from replay.parsers.deepseek_v32 import (
    DSML,
    EOS,
    FC_CLOSE,
    FC_OPEN,
    INVOKE,
    INVOKE_CLOSE,
    PARAM,
    PARAM_CLOSE,
    TC_CLOSE,
    TC_OPEN,
    DeepSeekV32Parser,
)
from replay.stream import check_stream_equals_whole
from strategies import (
    PROPERTY,
    RawArgsFirst,
    SilentFinish,
    all_chunkings,
    assert_property,
    check_corpus_records,
    json_values,
    long_unterminated_guard,
    stream,
    text_with,
    with_reasoning,
)

P = DeepSeekV32Parser
MARKS = [FC_OPEN, FC_CLOSE, TC_OPEN, TC_CLOSE, INVOKE, INVOKE_CLOSE, PARAM, PARAM_CLOSE, DSML, "<" + DSML, "</" + DSML, EOS, 'string="', '">']
SAFE_MARKS = [m for m in MARKS if m not in (PARAM_CLOSE, "</" + DSML, DSML)]  # may appear inside values
TOOLS = [
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"}, "s": {"type": "string"}, "x": {"type": "number"}, "b": {"type": "boolean"}, "o": {"type": "object"}}}}},
]


def param(key, value, flag=None):
    if flag is None:
        flag = "true" if isinstance(value, str) else "false"
        value = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f'{PARAM} name="{key}" string="{flag}">{value}{PARAM_CLOSE}'


def invoke(name, *params, sep="\n"):
    return f'{INVOKE} name="{name}">{sep}' + sep.join(params) + (sep if params else "") + INVOKE_CLOSE


# ----------------------------------------------------------------------------- strategies
str_values = st.one_of(st.text(max_size=8), st.sampled_from(["", " padded ", "a\nb", '"q"', "1", "true", "中文😀"]),
                       st.builds(lambda a, m: a + m, st.text(max_size=3), st.sampled_from(SAFE_MARKS)))


@st.composite
def dsml_param(draw):
    key = draw(st.sampled_from(["n", "s", "x", "b", "o", "city", "路径", ""]))
    kind = draw(st.sampled_from(["str", "json", "raw"]))
    if kind == "str":
        return param(key, draw(str_values))
    if kind == "json":
        return param(key, draw(json_values(SAFE_MARKS)))
    return param(key, draw(st.sampled_from(["1", " 2 ", "abc", "1.5", "tru", "{}", "[1,", "null"])), "false")


@st.composite
def dsml_invoke(draw):
    name = draw(st.sampled_from(["f", "get_weather", "a.b-c", "数据"]))
    if draw(st.integers(0, 5)) == 0:
        return f'{INVOKE} name="{name}">\n{json.dumps(draw(st.dictionaries(st.text(max_size=3), json_values(SAFE_MARKS), max_size=2)))}\n{INVOKE_CLOSE}'
    return invoke(name, *draw(st.lists(dsml_param(), max_size=3)), sep=draw(st.sampled_from(["\n", "", " "])))


dsml_malformed = st.one_of(
    st.builds(lambda t: f'{INVOKE} name="f">{t}{INVOKE_CLOSE}', text_with(MARKS)),
    st.builds(lambda t: f"{INVOKE}{t}>{INVOKE_CLOSE}", text_with(MARKS)),
    st.sampled_from(
        [
            f'{INVOKE} name="">{INVOKE_CLOSE}',
            f'{INVOKE} name="f">{PARAM} name="a" string="maybe">1{PARAM_CLOSE}{INVOKE_CLOSE}',
            f'{INVOKE} name="f">{PARAM} name="a" string="true">1{INVOKE_CLOSE}',
            f'{INVOKE} name="f">junk{PARAM} name="a" string="true">1{PARAM_CLOSE}{INVOKE_CLOSE}',
            f'{INVOKE} name="f">[1]{INVOKE_CLOSE}',
            f'{INVOKE} name="f">{PARAM} name="a" string="true">1{PARAM_CLOSE}',  # no invoke end
            "stray text ",
        ]
    ),
)


@st.composite
def dsml_bodies(draw):
    parts = [draw(text_with(MARKS))]
    for _ in range(draw(st.sampled_from([0, 1, 1, 2]))):
        opener = draw(st.sampled_from([FC_OPEN, FC_OPEN, TC_OPEN]))
        parts.append(opener + draw(st.sampled_from(["\n", "", " \n"])))
        for _ in range(draw(st.sampled_from([0, 1, 2, 3]))):
            parts.append(draw(st.one_of(dsml_invoke(), dsml_invoke(), dsml_malformed)))
            parts.append(draw(st.sampled_from(["\n", "", "\n\n"])))
        parts.append(draw(st.sampled_from([FC_CLOSE if opener == FC_OPEN else TC_CLOSE, FC_CLOSE, ""])))
        parts.append(draw(st.sampled_from(["", EOS, "\n", "tail"])))
    text = "".join(parts)
    if draw(st.booleans()) and draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


@PROPERTY
@given(with_reasoning(dsml_bodies(), MARKS), st.sampled_from([None, TOOLS]))
def test_deepseek_v32_stream_equals_whole(case, tools):
    text, reasoning_open = case
    assert_property(P, text, tools=tools, reasoning_open=reasoning_open)


# ----------------------------------------------------------------------------- exact examples
A = invoke("get_weather", param("city", "Paris"), param("days", 3))
B = invoke("get_time", param("tz", "Europe/Paris"))
TWO = f"{FC_OPEN}\n{A}\n{B}\n{FC_CLOSE}{EOS}"
CALLS = (ToolCall("get_weather", '{"city": "Paris", "days": 3}'), ToolCall("get_time", '{"tz": "Europe/Paris"}'))


def test_two_calls_in_one_delta():
    assert P().parse("Let me check.\n\n" + TWO) == ParseResult("Let me check.\n\n", CALLS)
    got = stream(P, ["Let me check.\n\n" + TWO])
    assert [(c.index, c.name, c.arguments) for c in got.calls] == [(0, "get_weather", CALLS[0].arguments), (1, "get_time", CALLS[1].arguments)]
    assert got.content == "Let me check.\n\n" and got.finish_reason == "tool_calls"


def test_tag_split_across_deltas():
    p = P()
    first = p.feed("ok <")
    assert first.content == "ok "  # "<" may start <｜DSML｜function_calls>
    assert not p.feed(DSML + "function_")
    assert not p.feed("calls>\n" + A[:-3])
    assert p.feed(A[-3:]).calls == [CallDelta(0, "get_weather", CALLS[0].arguments)]
    assert not p.feed("\n</" + DSML)
    assert not p.feed("function_calls>")
    assert not p.finish()


def test_call_end_and_next_start_in_one_delta():
    i = TWO.index(INVOKE_CLOSE)
    j = i + len(INVOKE_CLOSE) + 1 + len(INVOKE) + 3
    got = stream(P, [TWO[:i], TWO[i:j], TWO[j:]])
    assert [c.name for c in got.calls] == ["get_weather", "get_time"] and got.content == ""


def test_invoke_cut_off_is_no_call_and_finish_releases_it():
    text = f"{FC_OPEN}\n{A}\n{INVOKE} name=\"g\">\n{param('a', 1)}"
    whole = P().parse(text)
    assert whole == ParseResult(f"{INVOKE} name=\"g\">\n{param('a', 1)}", (CALLS[0],))
    p = P()
    first = p.feed(text)
    assert first.calls == [CallDelta(0, "get_weather", CALLS[0].arguments)] and first.content == ""
    last = p.finish()
    assert not last.calls and last.content == whole.content
    for k in range(0, len(text), 7):
        assert_property(P, text[:k])


def test_zero_arg_call_v4_wrapper_and_json_body():
    text = f'{TC_OPEN}\n{INVOKE} name="now">\n{INVOKE_CLOSE}\n{INVOKE} name="j">{{"a": [1, "x"]}}{INVOKE_CLOSE}\n{TC_CLOSE}'
    assert P().parse(text) == ParseResult("", (ToolCall("now", "{}"), ToolCall("j", '{"a": [1, "x"]}')))
    assert_property(P, text)


def test_schema_typing_of_string_false_values():
    text = FC_OPEN + invoke("f", param("n", "1", "false"), param("s", "1", "false"), param("x", "1.5", "false"),
                            param("b", "True", "false"), param("q", "[1]", "false"), param("s2", " 1 ", "true")) + FC_CLOSE
    args = json.loads(P(TOOLS).parse(text).calls[0].arguments)
    assert args == {"n": 1, "s": "1", "x": 1.5, "b": True, "q": [1], "s2": " 1 "}
    assert isinstance(args["n"], int) and args["s"] == "1"
    assert json.loads(P().parse(text).calls[0].arguments)["s"] == 1  # undeclared: JSON value
    assert_property(P, text, tools=TOOLS)


def test_malformed_invoke_is_content_and_parsing_goes_on():
    bad = f'{INVOKE} name="f">{PARAM} name="a" string="maybe">1{PARAM_CLOSE}{INVOKE_CLOSE}'
    text = f"{FC_OPEN}\n{bad}\n{A}\n{FC_CLOSE}"
    assert P().parse(text) == ParseResult(bad, (CALLS[0],))
    assert_property(P, text)


def test_reasoning_split():
    text = "plan</think>\n\nok\n\n" + TWO
    assert P(reasoning_open=True).parse(text) == ParseResult("ok\n\n", CALLS, "plan")
    assert P().parse("<think>plan</think>" + TWO) == ParseResult("", CALLS, "plan")
    assert_property(P, text, reasoning_open=True)


# ----------------------------------------------------------------------------- planted bugs
class V32RawArgs(RawArgsFirst, DeepSeekV32Parser):
    pass


class V32SilentFinish(SilentFinish, DeepSeekV32Parser):
    """finish() never reports calls here (each call closes with its end tag in a feed); losing
    finish() loses the held-back text and the release of an open invoke."""


class V32Greedy(DeepSeekV32Parser):
    """Planted bug (c): invokes matched greedily, the first running to the last end tag."""

    def parse(self, text):
        calls = []
        for m in re.finditer(re.escape(INVOKE) + r'\s+name="([^"]+)"\s*>(.*)' + re.escape(INVOKE_CLOSE), text, re.S):
            args = dict(re.findall(re.escape(PARAM) + r'\s+name="([^"]*)"\s+string="true"\s*>(.*?)' + re.escape(PARAM_CLOSE), m.group(2), re.S))
            calls.append(ToolCall(m.group(1), json.dumps(args, ensure_ascii=False)))
        return ParseResult(text[: text.find(FC_OPEN)] if calls else text, tuple(calls))


CUT = f"{FC_OPEN}\n{A}\n{INVOKE} name=\"g\">"


@pytest.mark.parametrize("planted, text", [(V32RawArgs, TWO), (V32SilentFinish, CUT), (V32Greedy, TWO)])
def test_planted_bug_is_caught(planted, text):
    assert check_stream_equals_whole(DeepSeekV32Parser, text, all_chunkings(DeepSeekV32Parser, text)) == []
    assert check_stream_equals_whole(planted, text, all_chunkings(planted, text)), f"{planted.__name__} not caught"


# ----------------------------------------------------------------------------- no catastrophic backtracking
def test_one_megabyte_unterminated_call():
    text = f'{FC_OPEN}\n{INVOKE} name="f">\n{PARAM} name="a" string="true">' + "x</" * 350_000
    long_unterminated_guard(P, text, content=None)  # the block's open tag is framing


# ----------------------------------------------------------------------------- real outputs
def test_corpus_deepseek_v3_2_dsml():
    check_corpus_records(P, "deepseek_v3_2_dsml.jsonl", 11, calls_only=True)
