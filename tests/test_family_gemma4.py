"""Gemma 4 parser: property, exact examples, planted bugs, 1 MB guard, corpus, public bugs."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.parsers.base import CallDelta, ParseResult, ToolCall
from replay.parsers.gemma4 import CH_END, CH_START, END, START, STR, TOOL_RESPONSE, TURN_END, Gemma4Parser
from replay.stream import check_stream_equals_whole, split
from strategies import (
    DropFinishCalls,
    RawArgsFirst,
    all_chunkings,
    assert_property,
    check_corpus_records,
    check_public_bug_cases,
    long_unterminated_guard,
    opened,
    prompt_opened,
    stream,
    text_with,
)

G_MARKERS = [START, END, STR, CH_START, CH_END, TOOL_RESPONSE, TURN_END, "<|tool", "<tool_", "}", "{", ":", ","]
FAMILY_PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- strategy: values in Gemma notation
str_text = st.one_of(
    st.text(max_size=6).filter(lambda s: STR not in s),
    st.sampled_from(["}<tool_call|>", START, "a,b:c", "é中😀", "\n", "\\", '"', CH_END, "{[", "<|\"", "|>"]),
)
keys = st.one_of(st.sampled_from(["city", "n", "a_b", "x-y", "é"]), st.text("abcXYZ_ 9", min_size=1, max_size=4).filter(str.strip))
bare_values = st.one_of(
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["true", "false", "null", "None", "nil", "1.5e10", "108.", "abc", "1e5", " 7 ", "-0.0"]),
)


def gemma_value(depth=2):
    leaf = st.one_of(str_text.map(lambda s: STR + s + STR), bare_values)
    if depth == 0:
        return leaf
    sub = gemma_value(depth - 1)
    return st.one_of(
        leaf,
        leaf,
        st.lists(sub, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
        gemma_object(sub),
    )


def gemma_object(values):
    pair = st.tuples(st.one_of(keys, keys.map(lambda k: STR + k + STR)), values).map(lambda kv: f"{kv[0]}:{kv[1]}")
    return st.lists(pair, max_size=3).map(lambda ps: "{" + ",".join(ps) + "}")


names = st.one_of(st.sampled_from(["get_weather", "f", "a.b", "x-1"]), st.text("abc_.-9é", min_size=1, max_size=4))


@st.composite
def gemma_call(draw):
    return f"{START}call:{draw(names)}{draw(gemma_object(gemma_value()))}{draw(st.sampled_from(['', '', ' ', chr(10)]))}{END}"


malformed = st.one_of(
    st.builds(lambda t: f"{START}{t}{END}", text_with(G_MARKERS)),
    st.builds(lambda t: f"{START}call:f{{{t}}}{END}", text_with(G_MARKERS)),
    st.sampled_from(
        [
            f"{START}call:{{a:1}}{END}",
            f"{START}call:f{{a:}}{END}",
            f"{START}call:f{{a:1}} junk{END}",
            f"{START}call:f{{a:{{}}b:1}}{END}",
            f"{START}call:f{{a:{STR}open}}{END}tail",
            f"{START}call:f{{a:1]{END}",
            f"{START}call f{{}}{END}",
            f"{START}call:f{{a:1<x}}{END}",
        ]
    ),
)


@st.composite
def gemma_outputs(draw):
    parts = []
    if draw(st.booleans()):
        parts.append(CH_START + draw(st.sampled_from(["thought\n", "thought", "", "thoughtful "])) + draw(text_with(G_MARKERS)) + draw(st.sampled_from([CH_END, CH_END, ""])))
    parts.append(draw(text_with(G_MARKERS)))
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        parts.append(draw(st.one_of(gemma_call(), gemma_call(), malformed)))
        parts.append(draw(st.one_of(st.just(""), st.sampled_from([TOOL_RESPONSE, TURN_END, "\n", CH_START + "thought\nhm" + CH_END]), text_with(G_MARKERS))))
    text = "".join(parts)
    ending = draw(st.sampled_from(["keep", "keep", "unterminated", "cut"]))
    if ending == "unterminated" and text.endswith(END):
        text = text[: -len(END)] + draw(st.sampled_from(["", " ", "\n"]))
    elif ending == "cut" and text:
        text = text[: draw(st.integers(0, len(text)))]
    return text


@FAMILY_PROPERTY
@given(gemma_outputs())
def test_gemma4_stream_equals_whole(text):
    assert_property(Gemma4Parser, text)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gemma_outputs())
def test_gemma4_reasoning_open_stream_equals_whole(text):
    assert_property(opened(Gemma4Parser), text)


# ----------------------------------------------------------------------------- exact examples
CALL_A = f'{START}call:get_weather{{city:{STR}Paris{STR},days:3}}{END}'
CALL_B = f'{START}call:get_time{{tz:{STR}Europe/Paris{STR}}}{END}'
TWO_CALLS = (ToolCall("get_weather", '{"city": "Paris", "days": 3}'), ToolCall("get_time", '{"tz": "Europe/Paris"}'))


def test_two_calls_in_one_delta():
    text = "Sure." + CALL_A + CALL_B
    assert Gemma4Parser().parse(text) == ParseResult("Sure.", TWO_CALLS)
    got = stream(Gemma4Parser, [text])
    assert [(c.index, c.name, c.arguments) for c in got.calls] == [(0, *TWO_CALLS[0].__dict__.values()), (1, *TWO_CALLS[1].__dict__.values())]
    assert got.content == "Sure." and got.finish_reason == "tool_calls"


def test_marker_split_across_deltas():
    deltas = ["Hi <|tool", "_call>call:f{a:<|", '"|>x<|"|>}<tool', "_call|> bye <|tool_"]
    p = Gemma4Parser()
    events = [p.feed(d) for d in deltas]
    assert events[0].content == "Hi "
    assert events[3].calls == [CallDelta(0, "f", '{"a": "x"}')] and events[3].content == " bye "
    assert p.finish().content == "<|tool_"


def test_call_end_and_next_start_in_one_delta():
    text = CALL_A + CALL_B
    k = len(CALL_A)
    got = stream(Gemma4Parser, [text[: k - 4], text[k - 4 : k + 15], text[k + 15 :]])
    assert [(c.name, c.arguments) for c in got.calls] == [(c.name, c.arguments) for c in TWO_CALLS]


def test_call_completed_only_at_finish():
    p = Gemma4Parser()
    assert not p.feed(f"{START}call:f{{n:12}}")  # the end marker may follow
    assert p.finish().calls == [CallDelta(0, "f", '{"n": 12}')]


def test_cut_off_call_is_content():
    text = f"x{START}call:f{{a:{STR}Par"
    assert Gemma4Parser().parse(text) == ParseResult(text, ())
    assert_property(Gemma4Parser, text)


def test_zero_arg_call_and_values():
    assert Gemma4Parser().parse(f"{START}call:now{{}}{END}").calls == (ToolCall("now", "{}"),)
    text = f"{START}call:f{{a:[1,{STR}x}}<tool_call|>{STR},{{b:true}}],c:1.5,d:None,e:108.,f:1e5,<|\"|>k k<|\"|>:-7}}{END}"
    args = json.loads(Gemma4Parser().parse(text).calls[0].arguments)
    assert args == {"a": [1, "x}<tool_call|>", {"b": True}], "c": 1.5, "d": None, "e": 108.0, "f": "1e5", "k k": -7}
    assert_property(Gemma4Parser, text)


def test_no_schema_typing_notation_carries_types():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}}}]
    text = f"{START}call:f{{a:1,b:{STR}1{STR}}}{END}"
    assert Gemma4Parser(tools).parse(text).calls == (ToolCall("f", '{"a": 1, "b": "1"}'),)


def test_reasoning_split():
    text = f"{CH_START}thought\nplan{CH_END}Answer{CALL_A}{CH_START}thought\nmore{CH_END}{TOOL_RESPONSE}"
    assert Gemma4Parser().parse(text) == ParseResult("Answer", (TWO_CALLS[0],), "planmore")
    got = stream(Gemma4Parser, split(text, "char", markers=Gemma4Parser.markers))
    assert (got.reasoning, got.content) == ("planmore", "Answer")
    assert opened(Gemma4Parser)().parse(f"thought\nx{CH_END}y") == ParseResult("y", (), "thought\nx")


# ----------------------------------------------------------------------------- planted bugs
class GemmaRawArgs(RawArgsFirst, Gemma4Parser):
    pass


class GemmaDropFinish(DropFinishCalls, Gemma4Parser):
    pass


class GemmaGreedy(Gemma4Parser):
    """Planted bug (c): a greedy ``\\{(.*)\\}<tool_call|>`` match merges consecutive calls."""

    def parse(self, text):
        m = re.search(r"<\|tool_call>call:([\w.-]+)\{(.*)\}<tool_call\|>", text, re.S)
        if not m:
            return super().parse(text)
        inner = Gemma4Parser().parse(f"{START}call:{m.group(1)}{{{m.group(2)}}}{END}")
        return ParseResult(text[: m.start()] + text[m.end() :], inner.calls[:1])


UNTERMINATED = CALL_A + f"{START}call:g{{n:1}}"


@pytest.mark.parametrize("planted, text", [(GemmaRawArgs, CALL_A + CALL_B), (GemmaDropFinish, UNTERMINATED), (GemmaGreedy, CALL_A + CALL_B)])
def test_planted_bug_is_caught(planted, text):
    assert check_stream_equals_whole(Gemma4Parser, text, all_chunkings(Gemma4Parser, text)) == []
    assert check_stream_equals_whole(planted, text, all_chunkings(planted, text)), f"{planted.__name__} was not caught"


# ----------------------------------------------------------------------------- 1 MB guard
@pytest.mark.parametrize("filler", [STR[:-1] + "x", "{[", "a:" + STR])
def test_one_megabyte_unterminated_call_completes(filler):
    text = f"{START}call:f{{a:{STR}" + filler * (1_000_000 // len(filler)) if filler[0] != "{" else f"{START}call:f{{a:" + filler * 500_000
    long_unterminated_guard(Gemma4Parser, text, content=None)


# ----------------------------------------------------------------------------- corpus
CORPUS_SKIPS = {
    3: "llama.cpp reasoning_format NONE: reasoning left in content with its markers (a client option)",
    24: "continue_final_message: reasoning and the start of the answer are in the prompt, not in the text",
    25: "continue_final_message: the reasoning is partly in the prompt",
}
CORPUS_CHECKED = 23


def test_corpus_gemma4():
    check_corpus_records(
        Gemma4Parser, "gemma4.jsonl", CORPUS_CHECKED, skip=CORPUS_SKIPS, reasoning_open_rule=prompt_opened(None), property_on_all=True
    )


# ----------------------------------------------------------------------------- public bugs
def test_public_bug_cases():
    check_public_bug_cases(Gemma4Parser, ("gemma4",))
