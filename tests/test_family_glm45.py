"""GLM-4.5/4.6/4.7/GLM-5 tool parser: property, exact examples, planted bugs, corpus, public bugs."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings, HealthCheck
from hypothesis import strategies as st

from replay.parsers.base import CallDelta, ParseResult, StreamDelta, ToolCall
from replay.parsers.glm45 import END, KEY_CLOSE, KEY_OPEN, START, VAL_CLOSE, VAL_OPEN, Glm45Parser
from replay.stream import check_stream_equals_whole, replay_stream, split
from strategies import (
    PROPERTY,
    RawArgsFirst,
    SilentFinish,
    all_chunkings,
    assert_property,
    check_corpus_records,
    check_public_bug_cases,
    json_values,
    long_unterminated_guard,
    names,
    opened,
    plain_chars,
    text_with,
)

GLM_MARKERS = [START, END, KEY_OPEN, KEY_CLOSE, VAL_OPEN, VAL_CLOSE, "<think>", "</think>", "<tool_", "</arg", "\\n"]


Glm45Open = opened(Glm45Parser)  # the reasoning section opened by the prompt


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {
                    "s": {"type": "string"},
                    "n": {"type": "integer"},
                    "x": {"type": "number"},
                    "b": {"type": "boolean"},
                    "o": {"type": "object"},
                    "a": {"type": "array"},
                },
            },
        },
    }
]


# ----------------------------------------------------------------------------- strategies
def _value_text(value):
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@st.composite
def glm_call(draw):
    newline = draw(st.booleans())  # 4.5/4.6 layout, else 4.7
    sep = draw(st.sampled_from(["\n", "\n", "\\n", " \n"])) if newline else ""
    name = draw(st.one_of(names.filter(lambda n: "<" not in n), st.sampled_from(["f", "get_weather"])))
    parts = [START, name, sep]
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(["s", "n", "x", "b", "o", "a", "city", ""]) | st.text(plain_chars, max_size=4))
        key = key.replace("<", "")
        value = draw(json_values(GLM_MARKERS))
        parts += [KEY_OPEN, key, KEY_CLOSE, sep, VAL_OPEN, _value_text(value).replace(VAL_CLOSE, ""), VAL_CLOSE, sep]
    parts.append(END)
    return "".join(parts)


glm_malformed = st.one_of(
    st.builds(lambda t: f"{START}{t}{END}", text_with(GLM_MARKERS)),
    st.builds(lambda t: f"{START}f{KEY_OPEN}k{KEY_CLOSE}{t}{END}", text_with(GLM_MARKERS)),
    st.sampled_from(
        [
            f"{START}{END}",
            f"{START}  \n{KEY_OPEN}a{KEY_CLOSE}{VAL_OPEN}1{VAL_CLOSE}{END}",
            f"{START}f{KEY_OPEN}a{KEY_CLOSE}junk{VAL_OPEN}1{VAL_CLOSE}{END}",
            f"{START}f{KEY_OPEN}a{VAL_OPEN}1{VAL_CLOSE}{END}",
            f"{START}f{VAL_OPEN}1{VAL_CLOSE}{END}",
            f"{START}f{KEY_OPEN}a{KEY_CLOSE}{VAL_OPEN}1{VAL_CLOSE}x{END}",
            f"{START}f{START}g{END}",
            f"{START}f{KEY_OPEN}a{KEY_CLOSE}{VAL_OPEN}1",
            f"{START}f\\",
        ]
    ),
)


@st.composite
def glm_outputs(draw):
    parts = []
    if draw(st.integers(0, 3)) == 0:
        lead, gap = draw(st.sampled_from(["", " ", "\n"])), draw(st.sampled_from(["", "\n\n"]))
        parts.append(lead + "<think>" + draw(text_with(GLM_MARKERS)) + "</think>" + gap)
    parts.append(draw(text_with(GLM_MARKERS)))
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        parts.append(draw(st.one_of(glm_call(), glm_call(), glm_malformed)))
        parts.append(draw(st.one_of(st.just(""), st.just("\n"), text_with(GLM_MARKERS))))
    text = "".join(parts)
    if draw(st.integers(0, 3)) == 0 and text:
        text = text[: draw(st.integers(0, len(text)))]
    return text


# ----------------------------------------------------------------------------- the property
@settings(PROPERTY, max_examples=100)
@given(glm_outputs())
def test_glm45_stream_equals_whole(text):
    assert_property(Glm45Parser, text)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(glm_outputs())
def test_glm45_stream_equals_whole_with_tools_and_open_reasoning(text):
    for cls in (Glm45Parser, Glm45Open):
        failures = check_stream_equals_whole(cls, text, all_chunkings(cls, text), tools=TOOLS)
        assert not failures, failures[0].describe()


# ----------------------------------------------------------------------------- exact examples
G46_A = f"{START}get_weather\n{KEY_OPEN}city{KEY_CLOSE}\n{VAL_OPEN}Paris{VAL_CLOSE}\n{KEY_OPEN}days{KEY_CLOSE}\n{VAL_OPEN}3{VAL_CLOSE}\n{END}"
G47_B = f"{START}get_time{KEY_OPEN}tz{KEY_CLOSE}{VAL_OPEN}Europe/Paris{VAL_CLOSE}{END}"
CALLS = (ToolCall("get_weather", '{"city": "Paris", "days": 3}'), ToolCall("get_time", '{"tz": "Europe/Paris"}'))


def _calls(got):
    return [(c.index, c.name, c.arguments) for c in got.calls]


def test_glm45_two_calls_in_one_delta_both_layouts():
    text = "Checking.\n" + G46_A + "\n" + G47_B
    assert Glm45Parser().parse(text) == ParseResult("Checking.\n\n", CALLS)
    got = replay_stream(Glm45Parser, None, [text])
    assert _calls(got) == [(0, *CALLS[0].__dict__.values()), (1, *CALLS[1].__dict__.values())]
    assert got.content == "Checking.\n\n" and got.finish_reason == "tool_calls"


def test_glm45_marker_split_across_deltas():
    deltas = ["Hi <tool", "_call>f<arg_k", "ey>a</arg_key><arg_value>1</arg_value></tool", "_call> bye <tool_"]
    p = Glm45Parser()
    events = [p.feed(d) for d in deltas]
    assert events[0].content == "Hi " and not events[1] and not events[2]
    assert events[3].calls == [CallDelta(0, "f", '{"a": 1}')] and events[3].content == " bye "
    assert p.finish() == StreamDelta(content="<tool_")


def test_glm45_call_end_and_next_start_in_one_delta():
    text = G46_A + G47_B
    i = text.index(END)
    deltas = [text[:i], text[i : len(G46_A) + len(START) + 4], text[len(G46_A) + len(START) + 4 :]]
    assert deltas[1] == END + START + "get_"
    p = Glm45Parser()
    events = [p.feed(d) for d in deltas]
    assert events[1].calls == [CallDelta(0, *CALLS[0].__dict__.values())]
    assert events[2].calls == [CallDelta(1, *CALLS[1].__dict__.values())]
    assert not p.finish()


def test_glm45_call_completed_in_last_delta_and_finish_sends_no_call():
    p = Glm45Parser()
    assert not p.feed(G47_B[:-3])
    last = p.feed(G47_B[-3:])
    assert last.calls == [CallDelta(0, "get_time", '{"tz": "Europe/Paris"}')]
    assert p.finish() == StreamDelta()


def test_glm45_cut_off_call_is_content():
    for text in (f"a{START}f{KEY_OPEN}x{KEY_CLOSE}{VAL_OPEN}1{VAL_CLOSE}", f"a{START}f", f"a{START}f{KEY_OPEN}x{KEY_CLOSE}{VAL_OPEN}12"):
        assert Glm45Parser().parse(text) == ParseResult(text)
        p = Glm45Parser()
        assert p.feed(text) == StreamDelta(content="a")
        assert p.finish() == StreamDelta(content=text[1:])
        assert_property(Glm45Parser, text)


def test_glm45_zero_arg_calls_give_empty_object():
    for text in (f"{START}now{END}", f"{START}now\n{END}", f"{START}now\\n{END}"):
        assert Glm45Parser().parse(text).calls == (ToolCall("now", "{}"),)
        got = replay_stream(Glm45Parser, None, split(text, "char", markers=Glm45Parser.markers))
        assert _calls(got) == [(0, "now", "{}")]


def test_glm45_schema_typing():
    text = f"{START}f{KEY_OPEN}s{KEY_CLOSE}{VAL_OPEN}1{VAL_CLOSE}{KEY_OPEN}n{KEY_CLOSE}{VAL_OPEN}1{VAL_CLOSE}{KEY_OPEN}u{KEY_CLOSE}{VAL_OPEN}true{VAL_CLOSE}{END}"
    assert Glm45Parser(TOOLS).parse(text).calls == (ToolCall("f", '{"s": "1", "n": 1, "u": true}'),)
    assert Glm45Parser().parse(text).calls == (ToolCall("f", '{"s": 1, "n": 1, "u": true}'),)
    got = replay_stream(Glm45Parser, TOOLS, split(text, "fixed-3", markers=Glm45Parser.markers))
    assert _calls(got) == [(0, "f", '{"s": "1", "n": 1, "u": true}')]
    spaced = f"{START}f{KEY_OPEN} s {KEY_CLOSE}{VAL_OPEN} a b {VAL_CLOSE}{END}"
    assert Glm45Parser(TOOLS).parse(spaced).calls == (ToolCall("f", '{"s": " a b "}'),)


def test_glm45_reasoning_split():
    text = "<think>plan</think>\n\nOK." + G47_B
    assert Glm45Parser().parse(text) == ParseResult("OK.", (CALLS[1],), "plan")
    got = replay_stream(Glm45Parser, None, ["<thi", "nk>pl", "an</th", "ink>\n", "\nOK.", G47_B])
    assert (got.reasoning, got.content, _calls(got)) == ("plan", "OK.", [(0, "get_time", CALLS[1].arguments)])
    opened = "plan</think>" + G47_B
    assert Glm45Parser(reasoning_open=True).parse(opened) == ParseResult("", (CALLS[1],), "plan")
    assert Glm45Parser().parse(opened) == ParseResult("plan</think>", (CALLS[1],))
    unclosed = "<think>still " + G47_B  # never closed: all reasoning, no call
    assert Glm45Parser().parse(unclosed) == ParseResult("", (), "still " + G47_B)
    for t in (text, opened, unclosed):
        assert_property(Glm45Parser, t)
        assert_property(Glm45Open, t)


def test_glm45_malformed_blocks_are_content_and_parsing_goes_on():
    bad = f"{START}f{KEY_OPEN}a{KEY_CLOSE}oops{VAL_OPEN}1{VAL_CLOSE}{END}"
    assert Glm45Parser().parse(bad + G47_B) == ParseResult(bad, (CALLS[1],))
    nested = f"{START}f oops " + G47_B
    assert Glm45Parser().parse(nested) == ParseResult(f"{START}f oops ", (CALLS[1],))
    in_value = f"{START}f{KEY_OPEN}code{KEY_CLOSE}{VAL_OPEN}x{END}y{VAL_CLOSE}{END}"
    assert Glm45Parser().parse(in_value).calls == (ToolCall("f", '{"code": "x</tool_call>y"}'),)
    for t in (bad + G47_B, nested, in_value, f"{START}{END}x"):
        assert_property(Glm45Parser, t)


# ----------------------------------------------------------------------------- planted bugs
class GlmRawArgs(RawArgsFirst, Glm45Parser):
    pass


class GlmSilentFinish(SilentFinish, Glm45Parser):
    """finish() reports nothing: GLM sends no call from finish(), so the loss shows as content."""


class GlmGreedy(Glm45Parser):
    """Planted bug (c): a greedy block regex merges consecutive calls into one."""

    def parse(self, text):
        m = re.search(r"<tool_call>(.*)</tool_call>", text, re.S)
        if not m:
            return ParseResult(text)
        body = m.group(1)
        name = re.split(r"<arg_key>|\n", body, maxsplit=1)[0].strip()
        args = {k.strip(): self._convert(name, k.strip(), v) for k, v in re.findall(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", body, re.S)}
        return ParseResult(text[: m.start()] + text[m.end() :], (ToolCall(name, json.dumps(args, ensure_ascii=False)),))


PLANT_TEXT = "Let me check.\n" + G46_A + "\n" + G47_B
PLANT_FINISH = G46_A + f"\n{START}g{KEY_OPEN}n{KEY_CLOSE}{VAL_OPEN}1"


@pytest.mark.parametrize("planted, text", [(GlmRawArgs, PLANT_TEXT), (GlmSilentFinish, PLANT_FINISH), (GlmGreedy, PLANT_TEXT)])
def test_planted_bug_is_caught(planted, text):
    assert check_stream_equals_whole(Glm45Parser, text, all_chunkings(Glm45Parser, text)) == []
    failures = check_stream_equals_whole(planted, text, all_chunkings(planted, text))
    assert failures, f"{planted.__name__} was not caught"


# ----------------------------------------------------------------------------- no backtracking
@pytest.mark.parametrize(
    "text",
    [
        f"{START}f{KEY_OPEN}a{KEY_CLOSE}{VAL_OPEN}" + "x<" * 500_000,
        f"{START}f" + "<arg_" * 200_000,
        f"{START}f{KEY_OPEN}a{KEY_CLOSE}{VAL_OPEN}1{VAL_CLOSE}" + " \\" * 500_000,
    ],
    ids=["value", "tag-prefixes", "separators"],
)
def test_glm45_megabyte_unterminated_call(text):
    long_unterminated_guard(Glm45Parser, text)


# ----------------------------------------------------------------------------- real outputs
#: line index (0-based) -> reason: records outside what a tool parser can reproduce from the text alone
SKIPPED = {
    7: "continue_final_message: the text continues a prefilled assistant message ('Hello, ' and the reasoning are in the prompt)",
    8: "continue_final_message: the reasoning's first words are in the prompt, not in the text",
}
CHECKED_CALLS = 5  # records whose calls are asserted
CHECKED_TEXT = 2  # further records (no calls) whose content/reasoning are asserted


def test_glm45_corpus():
    tally = check_corpus_records(Glm45Parser, "glm45.jsonl", CHECKED_CALLS + CHECKED_TEXT, skip=SKIPPED)
    assert tally.with_calls == CHECKED_CALLS


# ----------------------------------------------------------------------------- public bugs
def test_glm45_public_bug_cases():
    check_public_bug_cases(Glm45Parser, ("glm45",))
