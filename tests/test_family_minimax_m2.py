"""MiniMax-M2 tool parser: property, exact examples, planted bugs, corpus, public bugs."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.parsers.base import CallDelta, ParseResult, StreamDelta, ToolCall
from replay.parsers.minimax_m2 import END, INVOKE_CLOSE, INVOKE_OPEN, PARAM_CLOSE, PARAM_OPEN, START, MiniMaxM2Parser
from replay.stream import check_stream_equals_whole, replay_stream, split
from strategies import (
    PROPERTY,
    DropFinishCalls,
    RawArgsFirst,
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

MM_MARKERS = [START, END, INVOKE_OPEN, INVOKE_CLOSE, PARAM_OPEN, PARAM_CLOSE, "<think>", "</think>", "<minimax:", "</inv", '">', ">"]


MiniMaxOpen = opened(MiniMaxM2Parser)  # the reasoning section opened by the prompt (the template always does)


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


def _attr(draw, name):
    quote = draw(st.sampled_from(['"', '"', "'", ""]))
    return f"{quote}{name}{quote}"


@st.composite
def mm_invoke(draw):
    nl = draw(st.sampled_from(["\n", "\n", "", " "]))
    name = draw(st.one_of(names, st.sampled_from(["f", "get_weather"]))).replace("<", "").replace(">", "").strip() or "f"
    parts = [INVOKE_OPEN, _attr(draw, name), ">", nl]
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(["s", "n", "x", "b", "o", "a", "city"]) | st.text(plain_chars, min_size=1, max_size=4))
        key = key.replace("<", "").replace(">", "").strip() or "k"
        value = _value_text(draw(json_values(MM_MARKERS))).replace(PARAM_CLOSE, "")
        parts += [PARAM_OPEN, _attr(draw, key), ">", draw(st.sampled_from(["", "\n"])), value, PARAM_CLOSE, nl]
    parts.append(INVOKE_CLOSE)
    return "".join(parts)


@st.composite
def mm_block(draw):
    nl = draw(st.sampled_from(["\n", "", " \n"]))
    invokes = draw(st.lists(mm_invoke(), min_size=0, max_size=2))
    return START + nl + "".join(i + nl for i in invokes) + END


mm_malformed = st.one_of(
    st.builds(lambda t: f"{START}{t}{END}", text_with(MM_MARKERS)),
    st.builds(lambda t: f'{START}\n{INVOKE_OPEN}"f">{t}{INVOKE_CLOSE}\n{END}', text_with(MM_MARKERS)),
    st.sampled_from(
        [
            f'{START}\n{INVOKE_OPEN}"">\n{INVOKE_CLOSE}\n{END}',
            f'{START}\n{INVOKE_OPEN}"f<">\n{INVOKE_CLOSE}\n{END}',
            f'{START}\n{INVOKE_OPEN}"f">\n{PARAM_OPEN}"a">1{INVOKE_CLOSE}\n{END}',
            f'{START}\n{INVOKE_OPEN}"f">\n{INVOKE_CLOSE}junk{END}',
            f'{START}\n{INVOKE_OPEN}"f">x{PARAM_OPEN}"a">1{PARAM_CLOSE}{INVOKE_CLOSE}{END}',
            f'{START}\n{INVOKE_OPEN}"f">\n{INVOKE_CLOSE}\n{START}',
            f'{START}\n{INVOKE_OPEN}"f">\n{PARAM_OPEN}"a">1',
            f'{START}\n{INVOKE_OPEN}"f',
        ]
    ),
)


@st.composite
def mm_outputs(draw):
    parts = []
    if draw(st.integers(0, 3)) == 0:
        parts.append(draw(st.sampled_from(["", "<think>", "\n<think>"])) + draw(text_with(MM_MARKERS)) + "</think>" + draw(st.sampled_from(["", "\n\n"])))
    parts.append(draw(text_with(MM_MARKERS)))
    for _ in range(draw(st.sampled_from([0, 1, 1, 2]))):
        parts.append(draw(st.one_of(mm_block(), mm_block(), mm_malformed)))
        parts.append(draw(st.one_of(st.just(""), st.just("\n"), text_with(MM_MARKERS))))
    text = "".join(parts)
    ending = draw(st.sampled_from(["keep", "keep", "unterminated", "cut"]))
    if ending == "unterminated" and text.endswith(END):
        text = text[: -len(END)] + draw(st.sampled_from(["", "\n"]))
    elif ending == "cut" and text:
        text = text[: draw(st.integers(0, len(text)))]
    return text


# ----------------------------------------------------------------------------- the property
@settings(PROPERTY, max_examples=100)
@given(mm_outputs())
def test_minimax_m2_stream_equals_whole(text):
    assert_property(MiniMaxM2Parser, text)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mm_outputs())
def test_minimax_m2_stream_equals_whole_with_tools_and_open_reasoning(text):
    for cls in (MiniMaxM2Parser, MiniMaxOpen):
        failures = check_stream_equals_whole(cls, text, all_chunkings(cls, text), tools=TOOLS)
        assert not failures, failures[0].describe()


# ----------------------------------------------------------------------------- exact examples
INV_A = f'{INVOKE_OPEN}"get_weather">\n{PARAM_OPEN}"city">Paris{PARAM_CLOSE}\n{PARAM_OPEN}"days">3{PARAM_CLOSE}\n{INVOKE_CLOSE}\n'
INV_B = f'{INVOKE_OPEN}"get_time">\n{PARAM_OPEN}"tz">Europe/Paris{PARAM_CLOSE}\n{INVOKE_CLOSE}\n'
BLOCK = f"{START}\n{INV_A}{INV_B}{END}"
CALLS = (ToolCall("get_weather", '{"city": "Paris", "days": 3}'), ToolCall("get_time", '{"tz": "Europe/Paris"}'))


def _calls(got):
    return [(c.index, c.name, c.arguments) for c in got.calls]


def test_minimax_m2_two_invokes_in_one_delta():
    text = "Need both.\n</think>\n\n" + BLOCK
    assert MiniMaxM2Parser(reasoning_open=True).parse(text) == ParseResult("", CALLS, "Need both.\n")
    got = replay_stream(MiniMaxOpen, None, [text])
    assert _calls(got) == [(0, *CALLS[0].__dict__.values()), (1, *CALLS[1].__dict__.values())]
    assert (got.content, got.reasoning, got.finish_reason) == ("", "Need both.\n", "tool_calls")


def test_minimax_m2_marker_and_tags_split_across_deltas():
    deltas = ["Hi <minimax:tool", "_call>\n<invo", 'ke name="f">\n<param', 'eter name="a">1</para', "meter>\n</invoke>\n</minimax:tool", "_call> bye <mini"]
    p = MiniMaxM2Parser()
    events = [p.feed(d) for d in deltas]
    assert events[0].content == "Hi " and not any(events[1:5])
    assert events[5].calls == [CallDelta(0, "f", '{"a": 1}')] and events[5].content == " bye "
    assert p.finish() == StreamDelta(content="<mini")


def test_minimax_m2_block_end_and_next_block_start_in_one_delta():
    text = f'{START}\n{INV_A}{END}{START}\n{INV_B}{END}'
    i = text.index(END)
    deltas = [text[:i], text[i : i + len(END) + len(START) + 5], text[i + len(END) + len(START) + 5 :]]
    p = MiniMaxM2Parser()
    events = [p.feed(d) for d in deltas]
    assert events[1].calls == [CallDelta(0, *CALLS[0].__dict__.values())]
    assert events[2].calls == [CallDelta(1, *CALLS[1].__dict__.values())]
    assert not p.finish()


def test_minimax_m2_calls_reported_by_finish_when_block_is_cut_between_invokes():
    text = f"{START}\n{INV_A}{INV_B}"
    assert MiniMaxM2Parser().parse(text) == ParseResult("", CALLS)
    p = MiniMaxM2Parser()
    assert not p.feed(text)  # the block may still go on
    last = p.finish()
    assert last.calls == [CallDelta(0, *CALLS[0].__dict__.values()), CallDelta(1, *CALLS[1].__dict__.values())]
    assert last.content == ""


def test_minimax_m2_cut_off_call_is_content():
    for text in (f'a{START}\n{INVOKE_OPEN}"f">\n{PARAM_OPEN}"x">1', f"a{START}\n", f'a{START}\n{INVOKE_OPEN}"f">\n', f"a{START}\n{INV_A}{INVOKE_OPEN}"):
        assert MiniMaxM2Parser().parse(text) == ParseResult(text)
        p = MiniMaxM2Parser()
        assert p.feed(text) == StreamDelta(content="a")
        assert p.finish() == StreamDelta(content=text[1:])
        assert_property(MiniMaxM2Parser, text)


def test_minimax_m2_zero_arg_call_and_empty_block():
    text = f'{START}\n{INVOKE_OPEN}"empty_args">\n{INVOKE_CLOSE}\n{END}'
    assert MiniMaxM2Parser().parse(text) == ParseResult("", (ToolCall("empty_args", "{}"),))
    got = replay_stream(MiniMaxM2Parser, None, split(text, "char", markers=MiniMaxM2Parser.markers))
    assert _calls(got) == [(0, "empty_args", "{}")]
    assert MiniMaxM2Parser().parse(f"a{START}\n{END}b") == ParseResult("ab")


def test_minimax_m2_schema_typing_and_value_newlines():
    text = f'{START}{INVOKE_OPEN}"f">{PARAM_OPEN}"s">\n1\n{PARAM_CLOSE}{PARAM_OPEN}"n">1{PARAM_CLOSE}{PARAM_OPEN}"u">[1, "a"]{PARAM_CLOSE}{PARAM_OPEN}"w"> two words {PARAM_CLOSE}{INVOKE_CLOSE}{END}'
    typed = '{"s": "1", "n": 1, "u": [1, "a"], "w": " two words "}'
    assert MiniMaxM2Parser(TOOLS).parse(text).calls == (ToolCall("f", typed),)
    assert MiniMaxM2Parser().parse(text).calls == (ToolCall("f", '{"s": 1, "n": 1, "u": [1, "a"], "w": " two words "}'),)
    got = replay_stream(MiniMaxM2Parser, TOOLS, split(text, "fixed-3", markers=MiniMaxM2Parser.markers))
    assert _calls(got) == [(0, "f", typed)]


def test_minimax_m2_reasoning_split():
    text = "<think>plan</think>\n\nOK." + BLOCK
    assert MiniMaxM2Parser().parse(text) == ParseResult("OK.", CALLS, "plan")
    got = replay_stream(MiniMaxM2Parser, None, ["<thi", "nk>pl", "an</th", "ink>\n", "\nOK.", BLOCK])
    assert (got.reasoning, got.content, len(got.calls)) == ("plan", "OK.", 2)
    assert MiniMaxM2Parser(reasoning_open=True).parse("hm " + BLOCK) == ParseResult("", (), "hm " + BLOCK)
    for t in (text, "\n</think>\n\n" + BLOCK):
        assert_property(MiniMaxM2Parser, t)
        assert_property(MiniMaxOpen, t)


def test_minimax_m2_malformed_blocks_are_content_and_parsing_goes_on():
    bad = f'{START}\n{INVOKE_OPEN}"f">\noops{INVOKE_CLOSE}\n{END}'
    assert MiniMaxM2Parser().parse(bad + BLOCK) == ParseResult(bad, CALLS)
    restart = f'{START}\n{INVOKE_OPEN}"f'
    assert MiniMaxM2Parser().parse(restart + BLOCK) == ParseResult(restart, CALLS)
    in_value = f'{START}{INVOKE_OPEN}"f">{PARAM_OPEN}"code">a{INVOKE_CLOSE}{END}b{PARAM_CLOSE}{INVOKE_CLOSE}{END}'
    assert MiniMaxM2Parser().parse(in_value).calls == (ToolCall("f", '{"code": "a</invoke></minimax:tool_call>b"}'),)
    for t in (bad + BLOCK, restart + BLOCK, in_value):
        assert_property(MiniMaxM2Parser, t)


# ----------------------------------------------------------------------------- planted bugs
class MiniMaxRawArgs(RawArgsFirst, MiniMaxM2Parser):
    pass


class MiniMaxDropFinishCalls(DropFinishCalls, MiniMaxM2Parser):
    pass


class MiniMaxGreedy(MiniMaxM2Parser):
    """Planted bug (c): a greedy invoke regex merges consecutive invokes into one call."""

    def parse(self, text):
        m = re.search(r'<invoke name="(.*?)">(.*)</invoke>', text, re.S)
        if not m:
            return ParseResult(text)
        args = {k: self._convert(m.group(1), k, v) for k, v in re.findall(r'<parameter name="(.*?)">(.*?)</parameter>', m.group(2), re.S)}
        content = re.sub(r"<minimax:tool_call>.*?</minimax:tool_call>", "", text, flags=re.S)
        return ParseResult(content, (ToolCall(m.group(1), json.dumps(args, ensure_ascii=False)),))


PLANT_TEXT = "Let me check.\n" + BLOCK
PLANT_FINISH = f"{START}\n{INV_A}{INV_B}"


@pytest.mark.parametrize("planted, text", [(MiniMaxRawArgs, PLANT_TEXT), (MiniMaxDropFinishCalls, PLANT_FINISH), (MiniMaxGreedy, PLANT_TEXT)])
def test_planted_bug_is_caught(planted, text):
    assert check_stream_equals_whole(MiniMaxM2Parser, text, all_chunkings(MiniMaxM2Parser, text)) == []
    failures = check_stream_equals_whole(planted, text, all_chunkings(planted, text))
    assert failures, f"{planted.__name__} was not caught"


# ----------------------------------------------------------------------------- no backtracking
@pytest.mark.parametrize(
    "text",
    [
        f'{START}\n{INVOKE_OPEN}"f">\n{PARAM_OPEN}"a">' + "x<" * 500_000,
        f'{START}\n{INVOKE_OPEN}"f' + "<minimax:" * 120_000,
        f"{START}" + " \n" * 500_000,
    ],
    ids=["value", "attribute", "whitespace"],
)
def test_minimax_m2_megabyte_unterminated_call(text):
    long_unterminated_guard(MiniMaxM2Parser, text)


# ----------------------------------------------------------------------------- real outputs
#: line index (0-based) -> reason: records outside what a tool parser can reproduce from the text alone
SKIPPED = {
    4: "continue_final_message: the text continues a prefilled assistant message ('Hello, ' and the reasoning are in the prompt)",
    5: "continue_final_message: the reasoning's first words are in the prompt, not in the text",
}
CHECKED_CALLS = 4  # records whose calls are asserted
CHECKED_TEXT = 2  # further records (no calls) whose content/reasoning are asserted


def test_minimax_m2_corpus():
    tally = check_corpus_records(MiniMaxM2Parser, "minimax_m2.jsonl", CHECKED_CALLS + CHECKED_TEXT, skip=SKIPPED)
    assert tally.with_calls == CHECKED_CALLS


# ----------------------------------------------------------------------------- public bugs
def test_minimax_m2_public_bug_cases():
    check_public_bug_cases(MiniMaxM2Parser, ("minimax_m2", "minimax-m2"))
