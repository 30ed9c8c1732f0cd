"""Seed-OSS XML tool calls: property, exact examples, planted bugs, long input, corpus, public bugs.

The grammar is Qwen3-Coder's (``replay/parsers/_xmlcall.py``); the strategy and checkers are
shared with tests/test_family_qwen3_coder.py (in strategies.py) and used here with Seed-OSS's tags.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replay.parsers.base import CallDelta, ParseResult, ToolCall
from replay.parsers.seed_oss import SeedOssParser
from replay.stream import check_stream_equals_whole, replay_stream, split
from strategies import (
    CONTINUE,
    PROPERTY,
    TYPED_TOOLS,
    DropFinishCalls,
    RawArgsFirst,
    all_chunkings,
    assert_property,
    check_corpus_records,
    check_public_bug_cases,
    greedy_parser,
    llama_tools,
    long_unterminated_guard,
    opened,
    prompt_opened,
    stream,
    xml_outputs,
    xml_property,
)

P = SeedOssParser
S, E = "<seed:tool_call>", "</seed:tool_call>"


# ----------------------------------------------------------------------------- 1. the property
@PROPERTY
@given(xml_outputs(P), st.sampled_from(["plain", "plain", "typed", "open"]))
def test_seed_oss_stream_equals_whole(text, mode):
    if mode == "plain":
        assert_property(P, text)
    elif mode == "typed":
        xml_property(P, text, TYPED_TOOLS)
    else:
        assert_property(opened(P), text)


# ----------------------------------------------------------------------------- 2. exact examples
CALL_A = f"{S}\n<function=get_weather>\n<parameter=city>Paris</parameter>\n<parameter=days>3</parameter>\n</function>\n{E}"
CALL_B = f"{S}\n<function=get_time>\n<parameter=tz>Europe/Paris</parameter>\n</function>\n{E}"
CALLS = (ToolCall("get_weather", '{"city": "Paris", "days": 3}'), ToolCall("get_time", '{"tz": "Europe/Paris"}'))


def test_tags_and_markers():
    assert P.START == S and P.END == E and P.THINK == ("<seed:think>", "</seed:think>")
    assert set(P.markers) >= {S, E, "<seed:think>", "</seed:think>"} and P.name == "seed_oss"


def test_token_split_across_two_deltas():
    p = P()
    events = [p.feed("Sure.\n<seed:tool"), p.feed(CALL_A[len("<seed:tool") :]), p.feed("\n" + CALL_B[:5]), p.feed(CALL_B[5:])]
    assert events[0].content == "Sure.\n" and not events[0].calls
    assert events[1].calls == [CallDelta(0, "get_weather", CALLS[0].arguments)]
    assert events[2].content == "\n" and events[3].calls == [CallDelta(1, "get_time", CALLS[1].arguments)]
    assert not p.finish()


def test_several_calls_in_one_delta():
    text = "Sure.\n" + CALL_A + "\n" + CALL_B
    assert P().parse(text) == ParseResult("Sure.\n\n", CALLS)
    got = stream(P, [text])
    assert [(c.index, c.name, c.arguments) for c in got.calls] == [(0, "get_weather", CALLS[0].arguments), (1, "get_time", CALLS[1].arguments)]
    assert got.finish_reason == "tool_calls"


def test_call_end_and_next_start_in_one_delta():
    text = CALL_A + CALL_B
    i = len(CALL_A) - len(f"</function>\n{E}")
    j = len(CALL_A) + len(f"{S}\n<function=get")
    got = stream(P, [text[:i], text[i:j], text[j:]])
    assert [(c.name, c.arguments) for c in got.calls] == [(c.name, c.arguments) for c in CALLS] and got.content == ""


def test_call_completed_only_at_finish():
    text = f"{S}\n<function=f>\n<parameter=n>12</parameter>\n</function>"
    p = P()
    assert not p.feed(text)
    assert p.finish().calls == [CallDelta(0, "f", '{"n": 12}')]


def test_call_cut_off_is_content_not_a_call():
    text = f"{S}\n<function=calculate_sum>\n<parameter=numbers>[1,\n"
    assert P().parse(text) == ParseResult(text, ())
    got = stream(P, split(text, "fixed-2", markers=P.markers))
    assert got.calls == [] and got.content == text


def test_zero_arg_call_gives_empty_object():
    text = f"{S}\n<function=now>\n</function>\n{E}"
    assert P().parse(text).calls == (ToolCall("now", "{}"),)
    assert [(c.name, c.arguments) for c in stream(P, split(text, "char", markers=P.markers)).calls] == [("now", "{}")]


def test_schema_typing_by_declared_type():
    text = f"{S}\n<function=read>\n<parameter=page>1</parameter>\n</function>\n{E}"

    def tools(t):
        return [{"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {"page": {"type": t}}}}}]

    assert P(tools("integer")).parse(text).calls[0].arguments == '{"page": 1}'
    assert P(tools("string")).parse(text).calls[0].arguments == '{"page": "1"}'
    assert replay_stream(P, tools("string"), split(text, "char", markers=P.markers)).calls[0].arguments == '{"page": "1"}'


def test_reasoning_split():
    text = f"<seed:think>Maybe {S} later.</seed:think>\nOK.\n" + CALL_B
    assert P().parse(text) == ParseResult("OK.\n", (CALLS[1],), f"Maybe {S} later.")
    got = stream(P, split(text, "fixed-3", markers=P.markers))
    assert got.reasoning == f"Maybe {S} later." and got.content == "OK.\n" and len(got.calls) == 1
    assert P(reasoning_open=True).parse("hm</seed:think>" + CALL_B) == ParseResult("", (CALLS[1],), "hm")
    # <think> is not Seed-OSS's tag: plain content
    assert P().parse("<think>x</think>y").content == "<think>x</think>y"


def test_multiline_value_one_newline_stripped():
    text = f"{S}\n<function=edit>\n<parameter=new>\ndef f():\n    pass\n\n</parameter>\n</function>\n{E}"
    assert P().parse(text).calls[0].arguments == '{"new": "def f():\\n    pass\\n"}'


# ----------------------------------------------------------------------------- 3. planted bugs
class SeedRawArgs(RawArgsFirst, SeedOssParser):
    pass


class SeedDropFinish(DropFinishCalls, SeedOssParser):
    pass


SeedGreedy = greedy_parser(SeedOssParser)
PLANT_TEXT = "<seed:think>plan</seed:think>\n" + CALL_A + "\n" + CALL_B
PLANT_UNTERMINATED = CALL_A + "\n" + CALL_B[: -len(E)]


@pytest.mark.parametrize("planted, text", [(SeedRawArgs, PLANT_TEXT), (SeedDropFinish, PLANT_UNTERMINATED), (SeedGreedy, PLANT_TEXT)])
def test_planted_bug_is_caught(planted, text):
    assert check_stream_equals_whole(P, text, all_chunkings(P, text)) == []
    assert check_stream_equals_whole(planted, text, all_chunkings(planted, text)), f"{planted.__name__} not caught"


# ----------------------------------------------------------------------------- 4. long input
def test_one_megabyte_unterminated_call():
    body = ("<parameter=a>" + "x<" * 10 + "y" * 1000 + "</param") * 1000
    long_unterminated_guard(P, f"{S}\n<function=f>\n" + body[: 1 << 20])


# ----------------------------------------------------------------------------- 5. corpus
SEED_SKIPS = {6: CONTINUE, 7: CONTINUE}


def test_corpus_seed_oss():
    tally = check_corpus_records(P, "seed_oss.jsonl", 9, skip=SEED_SKIPS, reasoning_open_rule=prompt_opened(P.THINK), tools_for=llama_tools)
    assert len(tally.skipped) == len(SEED_SKIPS)


# ----------------------------------------------------------------------------- 6. public bugs
def test_public_bug_cases():
    check_public_bug_cases(P, ("seed_oss",))
