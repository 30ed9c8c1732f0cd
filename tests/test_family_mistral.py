"""Mistral ([TOOL_CALLS], pre-v11 array and v11+ [ARGS]/[CALL_ID]): property, examples, planted
bugs, a 1 MB unterminated call, the real outputs corpus and public bug cases."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.parsers.base import CallDelta, ParseResult, ToolCall
from replay.parsers.mistral import ARGS, CALL_ID, THINK_TAGS, TOOL_CALLS, MistralParser
from replay.stream import (
    check_stream_equals_whole,
    replay_stream,
    split,
)
from strategies import (
    DUMP_STYLES,
    PROPERTY,
    DropFinishCalls,
    RawArgsFirst,
    all_chunkings,
    assert_property,
    check_corpus_records,
    check_public_bug_cases,
    json_objects,
    long_unterminated_guard,
    names,
    prompt_opened,
    text_with,
    ws,
)

P = MistralParser
M_MARKERS = [TOOL_CALLS, ARGS, CALL_ID, *THINK_TAGS, "[TOOL", "_CALLS]", "[/TH", "[", "]"]


def stream(deltas, **kw):
    return replay_stream(P, None, deltas, **kw)


# ----------------------------------------------------------------------------- strategies
def _dump(obj, style):
    return json.dumps(obj, **style)


@st.composite
def v11_call(draw):
    name = draw(st.one_of(names, st.sampled_from(["special_function", "get_weather", " f "])))
    args = _dump(draw(json_objects(M_MARKERS)), draw(st.sampled_from(DUMP_STYLES)))
    call_id = draw(st.sampled_from(["", "", f"{CALL_ID}a1B2c3D4e", f"{CALL_ID}000000001"]))
    sep = draw(st.sampled_from([ARGS, ARGS, ARGS, ""]))  # vLLM also ends the name at "{"
    if sep == "" and not args.startswith("{"):
        sep = ARGS
    return f"{TOOL_CALLS}{name}{call_id}{sep}{draw(ws)}{args}{draw(ws)}"


@st.composite
def array_call(draw):
    items = []
    for _ in range(draw(st.integers(1, 3))):
        item = {"name": draw(names)}
        if draw(st.integers(0, 4)):
            item["arguments"] = draw(json_objects(M_MARKERS))
        if draw(st.booleans()):
            item["id"] = draw(st.sampled_from(["123456789", "a1B2c3D4e"]))
        items.append(item)
    body = _dump(items, draw(st.sampled_from(DUMP_STYLES)))
    return f"{TOOL_CALLS}{draw(st.sampled_from(['', ' ', chr(10)]))}{body}{draw(ws)}"


m_malformed = st.one_of(
    st.builds(lambda t: TOOL_CALLS + t, text_with(M_MARKERS)),
    st.builds(lambda t: f"{TOOL_CALLS}f{ARGS}{t}", text_with(M_MARKERS)),
    st.sampled_from(
        [
            f"{TOOL_CALLS}f{ARGS}[1, 2]",
            f'{TOOL_CALLS}f{ARGS}{{"a": 1}} junk',
            f"{TOOL_CALLS}{{}}",
            f"{TOOL_CALLS}[]",
            f'{TOOL_CALLS}[{{"name": 1, "arguments": {{}}}}]',
            f'{TOOL_CALLS} [{{"name": "f", "arguments": "x"}}]',
            f'{TOOL_CALLS}[{{"name": "f", "arguments": {{}}}}] tail',
            f"{TOOL_CALLS}f{CALL_ID}",
            f"{TOOL_CALLS}f{CALL_ID}abc",
            f'{TOOL_CALLS}f{ARGS}{{"a": 1.}}',
            f"{TOOL_CALLS}f{ARGS}1.",
            f"{TOOL_CALLS}f{ARGS}",
            f"{TOOL_CALLS}   ",
            f'{TOOL_CALLS}f{ARGS}"{TOOL_CALLS}"',
            f"{TOOL_CALLS}{ARGS}{{}}",
        ]
    ),
)


@st.composite
def mistral_outputs(draw):
    """``(text, reasoning_open)``."""
    head, ro = draw(
        st.one_of(
            st.just(("", False)),
            st.just(("", False)),
            st.builds(lambda r, w: (f"[THINK]{r}[/THINK]{w}", False), text_with(M_MARKERS), ws),
            st.builds(lambda r, w: (f"[THINK]{r}[/THINK]{w}", False), text_with(M_MARKERS), ws),
            st.builds(lambda r: (f"{r}[/THINK]", True), text_with(M_MARKERS)),
            st.builds(lambda r: (f"[THINK]{r}", False), text_with(M_MARKERS)),
        )
    )
    parts = [head, draw(st.one_of(st.just(""), text_with(M_MARKERS)))]
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        parts.append(draw(st.one_of(v11_call(), v11_call(), v11_call(), array_call(), array_call(), m_malformed)))
        parts.append(draw(st.sampled_from(["", "", "", "", "\n", " x "])))
    text = "".join(parts)
    if draw(st.integers(0, 5)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text, ro


@settings(PROPERTY, max_examples=100)
@given(mistral_outputs())
def test_mistral_stream_equals_whole(case):
    text, ro = case
    assert_property(P, text, reasoning_open=ro)


# ----------------------------------------------------------------------------- exact examples
TWO_V11 = f'{TOOL_CALLS}get_weather{CALL_ID}a1B2c3D4e{ARGS}{{"city": "Paris", "days": 3}}{TOOL_CALLS}get_time{ARGS}{{"tz":"Europe/Paris"}}'
TWO_CALLS = (ToolCall("get_weather", '{"city": "Paris", "days": 3}'), ToolCall("get_time", '{"tz": "Europe/Paris"}'))


def test_v11_two_calls_call_id_not_in_name():
    assert P().parse("Checking." + TWO_V11) == ParseResult("Checking.", TWO_CALLS)
    got = stream(["Checking." + TWO_V11])
    assert [(c.index, c.name, c.arguments) for c in got.calls] == [(0, *TWO_CALLS[0].__dict__.values()), (1, *TWO_CALLS[1].__dict__.values())]
    assert got.content == "Checking." and got.finish_reason == "tool_calls"


def test_pre_v11_array_with_space_and_ids():
    text = '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}, "id": "123456789"}, {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}]'
    assert P().parse(text) == ParseResult("", TWO_CALLS)
    assert_property(P, text)


def test_marker_split_across_deltas():
    deltas = ["Hi [TOOL", "_CALLS]f[AR", 'GS]{"a": 1}']
    p = P()
    events = [p.feed(d) for d in deltas]
    assert events[0].content == "Hi " and not events[1] and not events[2]
    assert p.finish().calls == [CallDelta(0, "f", '{"a": 1}')]


def test_several_calls_in_one_delta_and_last_reported_by_finish():
    p = P()
    first = p.feed(TWO_V11)
    assert first.calls == [CallDelta(0, "get_weather", TWO_CALLS[0].arguments)]  # decided by the next [TOOL_CALLS]
    last = p.finish()  # nothing follows the second call: only the end of the stream decides it
    assert last.calls == [CallDelta(1, "get_time", TWO_CALLS[1].arguments)] and last.content == ""


def test_call_end_and_next_start_in_one_delta():
    deltas = [f'{TOOL_CALLS}f{ARGS}{{"a": 1', f"}}\n{TOOL_CALLS}g{ARGS}{{", "}"]
    p = P()
    events = [p.feed(d) for d in deltas] + [p.finish()]
    assert events[1].calls == [CallDelta(0, "f", '{"a": 1}')]
    assert events[3].calls == [CallDelta(1, "g", "{}")]
    assert "".join(e.content for e in events) == ""


def test_cut_off_call_is_content():
    text = f'ok {TOOL_CALLS}f{ARGS}{{"a": "par'
    assert P().parse(text) == ParseResult(text, ())
    got = stream(split(text, "char", markers=P.markers))
    assert got.calls == [] and got.content == text and got.finish_reason == "stop"


def test_zero_arg_calls():
    assert P().parse(f"{TOOL_CALLS}now{ARGS}{{}}").calls == (ToolCall("now", "{}"),)
    assert P().parse('[TOOL_CALLS][{"name": "now"}]').calls == (ToolCall("now", "{}"),)  # absent arguments: {}


def test_tools_do_not_retype_json_arguments():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"properties": {"n": {"type": "integer"}}}}}]
    text = f'{TOOL_CALLS}f{ARGS}{{"n": "1", "m": 1}}'
    assert P(tools).parse(text).calls == (ToolCall("f", '{"n": "1", "m": 1}'),)


def test_reasoning_split():
    text = f'[THINK]Let me think about {TOOL_CALLS}f{ARGS}{{}} first[/THINK]\n{TOOL_CALLS}g{ARGS}{{"x": true}}'
    whole = P().parse(text)
    assert whole == ParseResult("", (ToolCall("g", '{"x": true}'),), f"Let me think about {TOOL_CALLS}f{ARGS}{{}} first")
    got = stream(split(text, "char", markers=P.markers))
    assert got.reasoning == whole.reasoning and [c.name for c in got.calls] == ["g"]
    opened = P(reasoning_open=True).parse("plan[/THINK]Answer.")
    assert opened == ParseResult("Answer.", (), "plan")


def test_malformed_rules():
    junk = f'{TOOL_CALLS}f{ARGS}{{"a": 1}} junk'
    good = f"{TOOL_CALLS}g{ARGS}{{}}"
    assert P().parse(junk + good) == ParseResult(junk, (ToolCall("g", "{}"),))
    assert P().parse(f"{TOOL_CALLS}f{CALL_ID}x{good}") == ParseResult(f"{TOOL_CALLS}f{CALL_ID}x", (ToolCall("g", "{}"),))
    assert P().parse(f"{TOOL_CALLS}[]") == ParseResult(f"{TOOL_CALLS}[]", ())
    assert P().parse(f"{TOOL_CALLS}f{ARGS}[1]") == ParseResult(f"{TOOL_CALLS}f{ARGS}[1]", ())
    # [TOOL_CALLS] inside an argument string does not end the span
    inside = f'{TOOL_CALLS}f{ARGS}{{"s": "a{TOOL_CALLS}b"}}'
    assert P().parse(inside).calls == (ToolCall("f", json.dumps({"s": f"a{TOOL_CALLS}b"})),)
    for text in (junk + good, inside, f"{TOOL_CALLS}f{CALL_ID}x{good}"):
        assert_property(P, text)


def test_too_deep_json_is_content_not_a_crash():
    deep = "[" * 3000 + "]" * 3000
    for text in (f'{TOOL_CALLS}f{ARGS}{{"a": {deep}}}{TOOL_CALLS}g{ARGS}{{}}', f"{TOOL_CALLS}{deep}"):
        whole = P().parse(text)
        assert whole.content == text.split(f"{TOOL_CALLS}g")[0] and len(whole.calls) == text.count(f"{TOOL_CALLS}g")
        for ch in ("whole", "fixed-40", "fixed-13"):
            got = stream(split(text, ch, markers=P.markers))
            assert got.content == whole.content and [c.name for c in got.calls] == [c.name for c in whole.calls]


# ----------------------------------------------------------------------------- planted bugs
class MistralRawArgs(RawArgsFirst, MistralParser):
    pass


class MistralDropFinish(DropFinishCalls, MistralParser):
    pass


class MistralGreedy(MistralParser):
    """Planted bug (c): a greedy whole-text regex runs from the first call's name to the last
    [ARGS], merging two calls into one."""

    def parse(self, text):
        m = re.search(r"\[TOOL_CALLS\](.+)\[ARGS\](.*)", text, re.S)
        if not m:
            return ParseResult(text)
        try:
            args = json.dumps(json.loads(m.group(2)), ensure_ascii=False)
        except ValueError:
            return ParseResult(text)
        return ParseResult(text[: m.start()], (ToolCall(m.group(1), args),))


PLANT_TEXT = f'{TOOL_CALLS}f{ARGS}{{"a": 1}}{TOOL_CALLS}g{ARGS}{{"b": [1, 2]}}'


@pytest.mark.parametrize("planted", [MistralRawArgs, MistralDropFinish, MistralGreedy])
def test_planted_bug_is_caught(planted):
    assert check_stream_equals_whole(MistralParser, PLANT_TEXT, all_chunkings(MistralParser, PLANT_TEXT)) == []
    assert check_stream_equals_whole(planted, PLANT_TEXT, all_chunkings(planted, PLANT_TEXT)), planted.__name__


# ----------------------------------------------------------------------------- 1 MB unterminated
@pytest.mark.parametrize(
    "text",
    [
        f'{TOOL_CALLS}f{ARGS}{{"a": "' + "x" * 1_000_000,
        TOOL_CALLS + "n" * 1_000_000,
        '[TOOL_CALLS][{"name": "f", "arguments": {"a": [' + "1, " * 330_000,
        TOOL_CALLS + "[" * 1_000_000,
    ],
    ids=["string", "name", "array", "nesting"],
)
def test_one_megabyte_unterminated_call(text):
    long_unterminated_guard(P, text)


# ----------------------------------------------------------------------------- real outputs
#: records not checked, by line number (0-based), with the reason
SKIPPED = {
    1: "reasoning_format none: llama.cpp leaves [THINK]...[/THINK] in content; the parser always splits it",
    6: "json_schema response format: llama.cpp strips the ```json fence from content",
    8: "continue_final_message: the expected message includes the prefilled text",
    9: "continue_final_message: the expected reasoning and content include the prefilled text",
    12: "continue_final_message: the expected content includes the prefilled text",
    16: "continue_final_message: the expected content includes the prefilled text",
}
CHECKED, WITH_CALLS = 16, 10
#: No Mistral template opens [THINK] in the prompt (the model writes it; vLLM enters reasoning only
#: once [THINK] was generated), so ``enable_thinking`` is not a sign of an opened section: only an
#: end tag without a start tag is.
OPENED = prompt_opened(THINK_TAGS, flag=False)


def test_corpus_records():
    tally = check_corpus_records(P, "mistral.jsonl", CHECKED, skip=SKIPPED, reasoning_open_rule=OPENED)
    assert tally.with_calls == WITH_CALLS


# ----------------------------------------------------------------------------- public bug cases
def test_public_bug_cases():
    check_public_bug_cases(P, ("mistral",))
