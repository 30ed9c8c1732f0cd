"""DeepSeek V3 / R1 tool parser: stream-equals-whole property, exact examples, planted bugs, corpus."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replay.parsers.base import CallDelta, ParseResult, ToolCall
from replay.parsers.deepseek_v3 import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, EOS, SEP, DeepSeekV3Parser
from replay.stream import check_stream_equals_whole, split
from strategies import (
    DUMP_STYLES,
    PROPERTY,
    RawArgsFirst,
    SilentFinish,
    all_chunkings,
    assert_property,
    check_corpus_records,
    json_objects,
    long_unterminated_guard,
    stream,
    text_with,
    with_reasoning,
    ws,
)

P = DeepSeekV3Parser
FENCE = "```json"
MARKS = [CALLS_BEGIN, CALL_BEGIN, SEP, CALL_END, CALLS_END, EOS, "```", FENCE, "\n```", CALL_END[:5]]


def block(name, args, *, kind="function", nl_before_fence="\n"):
    return f"{CALL_BEGIN}{kind}{SEP}{name}\n{FENCE}\n{args}{nl_before_fence}```{CALL_END}"


# ----------------------------------------------------------------------------- strategies
@st.composite
def v3_call(draw):
    args = json.dumps(draw(json_objects(MARKS)), **draw(st.sampled_from(DUMP_STYLES)))
    name = draw(st.sampled_from(["get_weather", "f", "a.b-c", "数据", " spaced "]))
    return f"{CALL_BEGIN}function{SEP}{name}\n{FENCE}{draw(ws)}{args}{draw(ws)}```{CALL_END}"


v3_malformed = st.one_of(
    st.builds(lambda t: f"{CALL_BEGIN}function{SEP}f\n{FENCE}\n{t}\n```{CALL_END}", text_with(MARKS)),
    st.builds(lambda t: f"{CALL_BEGIN}{t}{SEP}f\n{FENCE}\n{{}}\n```{CALL_END}", text_with(MARKS)),
    st.builds(lambda t: f"{CALL_BEGIN}function{SEP}{t}\n{FENCE}\n{{}}\n```{CALL_END}", text_with(MARKS)),
    st.sampled_from(
        [
            f"{CALL_BEGIN}function{SEP}f\n```\n{{}}\n```{CALL_END}",  # fence without json
            f"{CALL_BEGIN}function{SEP}\n{FENCE}\n{{}}\n```{CALL_END}",  # empty name
            f"{CALL_BEGIN}function{SEP}f{CALL_END}",
            f"{CALL_BEGIN}function{SEP}f\n{FENCE}\n[1]\n```{CALL_END}",
            f"{CALL_BEGIN}function{SEP}f\n{FENCE}\n{{}} x\n```{CALL_END}",
            f"{CALL_BEGIN}function{SEP}f\n{FENCE}\n{{}}\n```\n{CALL_END}",  # fence and end apart
            f"{CALL_BEGIN}function{SEP}f\n{FENCE}\n{{\"a\": 1{CALLS_END}{EOS}",
            f"{CALL_BEGIN}function{CALL_BEGIN}function{SEP}g\n{FENCE}\n{{}}```{CALL_END}",
        ]
    ),
)


@st.composite
def v3_bodies(draw):
    parts = [draw(text_with(MARKS))]
    n = draw(st.sampled_from([0, 1, 1, 2, 3]))
    if n:
        parts.append(draw(st.sampled_from([CALLS_BEGIN, CALLS_BEGIN, ""])))
        for _ in range(n):
            parts.append(draw(st.one_of(v3_call(), v3_call(), v3_malformed)))
            parts.append(draw(st.sampled_from(["", "\n", "\n", " x "])))
        parts.append(draw(st.sampled_from([CALLS_END, CALLS_END + EOS, ""])))
    parts.append(draw(st.one_of(st.just(""), st.just(EOS), text_with(MARKS))))
    text = "".join(parts)
    if draw(st.booleans()) and draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


@PROPERTY
@given(with_reasoning(v3_bodies(), MARKS))
def test_deepseek_v3_stream_equals_whole(case):
    text, reasoning_open = case
    assert_property(P, text, reasoning_open=reasoning_open)


# ----------------------------------------------------------------------------- exact examples
A = block("get_weather", '{"city": "Paris", "days": 3}')
B = block("get_time", '{"tz":"Europe/Paris"}')
TWO = f"{CALLS_BEGIN}{A}\n{B}{CALLS_END}{EOS}"
CALLS = (ToolCall("get_weather", '{"city": "Paris", "days": 3}'), ToolCall("get_time", '{"tz": "Europe/Paris"}'))


def test_two_calls_in_one_delta():
    assert P().parse("Sure." + TWO) == ParseResult("Sure.\n", CALLS)
    got = stream(P, ["Sure." + TWO])
    assert [(c.index, c.name, c.arguments) for c in got.calls] == [(0, "get_weather", CALLS[0].arguments), (1, "get_time", CALLS[1].arguments)]
    assert got.content == "Sure.\n" and got.finish_reason == "tool_calls"


def test_token_split_across_deltas():
    p = P()
    assert p.feed("ok" + CALLS_BEGIN[:3]).content == "ok"
    assert not p.feed(CALLS_BEGIN[3:] + A[:4])
    mid = p.feed(A[4:-4])
    assert not mid.calls
    assert p.feed(A[-4:]).calls == [CallDelta(0, "get_weather", CALLS[0].arguments)]
    assert not p.finish()


def test_call_end_and_next_start_in_one_delta():
    i = TWO.index(CALL_END)
    j = i + len(CALL_END) + 1 + len(CALL_BEGIN) + 4
    got = stream(P, [TWO[:i], TWO[i:j], TWO[j:]])
    assert [c.name for c in got.calls] == ["get_weather", "get_time"] and got.content == "\n"


def test_call_without_end_marker_is_no_call():
    """Complete JSON, no closing fence and end token: SGLang's and vLLM's regexes need
    ```<｜tool▁call▁end｜>, so no call; the section holds none, so it is content verbatim."""
    p = P()
    text = f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}now\n{FENCE}\n{{}}\n"
    assert not p.feed(text)
    fin = p.finish()
    assert fin.calls == [] and fin.content == text
    assert P().parse(text) == ParseResult(text, ())
    assert_property(P, text)


def test_call_cut_off_is_no_call():
    text = f"a{CALLS_BEGIN}{CALL_BEGIN}function{SEP}f\n{FENCE}\n{{\"x\": "
    assert P().parse(text) == ParseResult(text, ())  # a section holding no call: verbatim
    assert stream(P, split(text, "char", markers=P.markers)).calls == []
    for k in range(len(text)):
        assert_property(P, text[:k])


def test_zero_args_and_no_newline_before_closing_fence():
    text = f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}special_function\n{FENCE}\n{{}}```{CALL_END}{CALLS_END}"
    assert P().parse(text) == ParseResult("", (ToolCall("special_function", "{}"),))
    assert_property(P, text)


def test_malformed_header_and_json_are_content():
    bad_fence = f"{CALL_BEGIN}function{SEP}f\n```\n{{}}\n```{CALL_END}"
    assert P().parse(bad_fence + A) == ParseResult(bad_fence, (CALLS[0],))
    bad_json = block("f", '{"a": 1,}')
    assert P().parse(CALLS_BEGIN + bad_json + EOS) == ParseResult(CALLS_BEGIN + bad_json, ())  # no call: verbatim
    for t in (bad_fence + A, CALLS_BEGIN + bad_json + EOS):
        assert_property(P, t)


def test_reasoning_split():
    text = "<think>plan\n</think>\n\n" + TWO
    assert P().parse(text) == ParseResult("\n", CALLS, "plan\n")
    assert P(reasoning_open=True).parse("plan</think>" + A) == ParseResult("", (CALLS[0],), "plan")
    assert_property(P, text)
    assert_property(P, "plan</think>" + A, reasoning_open=True)


# ----------------------------------------------------------------------------- planted bugs
class V3RawArgs(RawArgsFirst, DeepSeekV3Parser):
    pass


class V3SilentFinish(SilentFinish, DeepSeekV3Parser):
    pass


class V3Greedy(DeepSeekV3Parser):
    """Planted bug (c): the JSON is matched greedily up to the last closing fence."""

    def parse(self, text):
        pat = re.escape(SEP) + r"(.*?)\n```json\n(.*)\n```" + re.escape(CALL_END)
        calls = []
        for m in re.finditer(pat, text, re.S):
            try:
                calls.append(ToolCall(m.group(1), json.dumps(json.loads(m.group(2)), ensure_ascii=False)))
            except ValueError:
                return ParseResult(text)
        return ParseResult("", tuple(calls))


UNTERMINATED = f"{CALLS_BEGIN}{A}\n{CALL_BEGIN}function{SEP}g\n{FENCE}\n{{\"n\": 2}}"


@pytest.mark.parametrize("planted, text", [(V3RawArgs, TWO), (V3SilentFinish, UNTERMINATED), (V3Greedy, TWO)])
def test_planted_bug_is_caught(planted, text):
    assert check_stream_equals_whole(DeepSeekV3Parser, text, all_chunkings(DeepSeekV3Parser, text)) == []
    assert check_stream_equals_whole(planted, text, all_chunkings(planted, text)), f"{planted.__name__} not caught"


# ----------------------------------------------------------------------------- no catastrophic backtracking
def test_one_megabyte_unterminated_call():
    text = f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}f\n{FENCE}\n{{\"a\": \"" + "x``" * 350_000
    long_unterminated_guard(P, text, content=None)  # the section token is dropped


# ----------------------------------------------------------------------------- real outputs
#: Records (by line index) of deepseek_r1_v3.jsonl not checked, with the reason.
V3_SKIPPED = {
    23: "llama.cpp test with reasoning extraction off: expected content keeps <think>...</think> (same text checked as record 25)",
    24: "llama.cpp lenient reader: <｜tool▁calls｜> with no <｜tool▁call▁begin｜> is not the family's syntax",
}


def test_corpus_deepseek_r1_v3():
    check_corpus_records(P, "deepseek_r1_v3.jsonl", 4, skip=V3_SKIPPED, calls_only=True)
