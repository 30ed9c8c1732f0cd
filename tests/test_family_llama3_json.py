"""Llama 3.x JSON tool parser: the stream-equals-whole property, exact examples, planted bugs,
a 1 MB unterminated call, the shared corpus and the public-bug cases."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.parsers.base import CallDelta, ParseResult, ToolCall
from replay.parsers.llama3_json import EOM, EOT, PYTHON_TAG, Llama3JsonParser
from replay.stream import check_stream_equals_whole, replay_stream, split
from strategies import (
    DUMP_STYLES,
    PROPERTY,
    PUBLIC_BUGS,
    RawArgsFirst,
    SilentFinish,
    all_chunkings,
    assert_property,
    check_corpus_records,
    check_public_bug_cases,
    json_objects,
    long_unterminated_guard,
    names,
    prompt_opened,
    public_bug_cases,
    stream,
    text_with,
    ws,
)

P = Llama3JsonParser
MARKERS = [PYTHON_TAG, EOT, EOM, "<|python", "_tag|>", ";", "{", "["]


# ----------------------------------------------------------------------------- strategy
@st.composite
def call_object(draw):
    key = draw(st.sampled_from(["parameters", "parameters", "arguments"]))
    return {"name": draw(names), key: draw(json_objects(MARKERS))}


@st.composite
def call_item(draw):
    """One item: a call object, or a JSON array of call objects (SGLang), in some dump style."""
    if draw(st.integers(0, 4)) == 0:
        value = draw(st.lists(call_object(), min_size=1, max_size=2))
    else:
        value = draw(call_object())
    return json.dumps(value, **draw(st.sampled_from(DUMP_STYLES)))


malformed_item = st.one_of(
    text_with(MARKERS),
    st.sampled_from(
        [
            '{"name": 1, "parameters": {}}',
            '{"name": "f"}',
            '{"name": "f", "parameters": [1]}',
            "[]",
            "[1, 2]",
            '[{"name": "f", "parameters": {}}, 3]',
            '{"name": "f", "parameters": {}',
            '{"a": "<|python_tag|>{\\"name\\": \\"g\\""',
            'brave_search.call(query="x")',
            "123",
            "1.",
            '{"name": "f", "parameters": {"a": 1.}}',
            "-",
        ]
    ),
)
separators = st.sampled_from(["; ", ";", " ; ", "\n", "", ";\n", "; " + PYTHON_TAG])


@st.composite
def llama_outputs(draw):
    lead = draw(st.sampled_from(["none", "ws", "tag", "text"]))
    parts = []
    if lead == "ws":
        parts.append(draw(ws))
    elif lead == "tag":
        parts.append(draw(st.sampled_from(["", "Sure. ", "\n"])) + PYTHON_TAG + draw(ws))
    elif lead == "text":
        parts.append(draw(text_with(MARKERS)))
    for i in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        if i:
            parts.append(draw(st.one_of(separators, text_with(MARKERS))))
        parts.append(draw(st.one_of(call_item(), call_item(), malformed_item)))
    parts.append(draw(st.one_of(st.just(""), st.just(EOT), ws, text_with(MARKERS))))
    text = "".join(parts)
    if draw(st.integers(0, 3)) == 0 and text:
        text = text[: draw(st.integers(0, len(text)))]
    return text


@settings(PROPERTY, max_examples=100)
@given(llama_outputs())
def test_llama3_stream_equals_whole(text):
    assert_property(P, text)


# ----------------------------------------------------------------------------- exact examples
A = '{"name": "get_weather", "parameters": {"city": "Tokyo", "unit": "celsius"}}'
B = '{"name": "get_time", "parameters": {"timezone": "Asia/Tokyo"}}'
CALLS = (ToolCall("get_weather", '{"city": "Tokyo", "unit": "celsius"}'), ToolCall("get_time", '{"timezone": "Asia/Tokyo"}'))


def calls_of(got):
    return tuple(ToolCall(c.name, c.arguments) for c in got.calls)


def test_python_tag_split_across_two_deltas():
    p = P()
    e1 = p.feed("Let me look. <|python")
    assert e1.content == "Let me look. " and not e1.calls  # "<|python" held back
    e2 = p.feed("_tag|>" + A)
    assert e2.calls == [CallDelta(0, "get_weather", CALLS[0].arguments)] and e2.content == ""
    assert not p.finish()
    assert P().parse("Let me look. <|python_tag|>" + A) == ParseResult("Let me look. ", CALLS[:1])


def test_several_calls_in_one_delta():
    text = PYTHON_TAG + A + "; " + B
    got = stream(P, [text])
    assert calls_of(got) == CALLS and got.content == "" and got.finish_reason == "tool_calls"
    assert [c.index for c in got.calls] == [0, 1]
    assert P().parse(text) == ParseResult("", CALLS)


def test_call_end_and_next_call_start_in_one_delta():
    text = A + "; " + B
    cut = len(A) - 3
    deltas = [text[:cut], text[cut : len(A) + 12], text[len(A) + 12 :]]
    assert deltas[1].startswith('"}}; {"name"')
    p = P()
    events = [p.feed(d) for d in deltas] + [p.finish()]
    assert events[1].calls == [CallDelta(0, "get_weather", CALLS[0].arguments)]  # sent at its closing brace
    assert events[2].calls == [CallDelta(1, "get_time", CALLS[1].arguments)]
    assert not events[3]


def test_call_completed_in_last_delta():
    """No end marker: a call ends at its closing brace, so the last feed() reports it and
    finish() has nothing left but held-back text."""
    p = P()
    assert not p.feed(A[:-1])
    last = p.feed("}")
    assert last.calls == [CallDelta(0, "get_weather", CALLS[0].arguments)]
    assert not p.finish()
    p = P()
    assert p.feed(A + "\n").calls and p.finish().content == "\n"  # trailing whitespace is content


def test_call_cut_off_by_end_of_stream_is_content():
    text = "<|python_tag|>" + A[:-10]
    assert P().parse(text) == ParseResult(text, ())
    got = stream(P, split(text, "fixed-5", markers=P.markers))
    assert got.calls == [] and got.content == text and got.finish_reason == "stop"
    assert_property(P, text)


def test_zero_arg_call():
    text = '{"name": "now", "parameters": {}}'
    assert P().parse(text).calls == (ToolCall("now", "{}"),)
    assert calls_of(stream(P, split(text, "char", markers=P.markers))) == (ToolCall("now", "{}"),)


def test_values_are_json_typed_not_schema_typed():
    """Llama writes JSON values: declared types do not retype them (no _schema conversion)."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}}}]
    text = '{"name": "f", "parameters": {"n": "1", "s": 1}}'
    assert P(tools).parse(text).calls == (ToolCall("f", '{"n": "1", "s": 1}'),)
    assert replay_stream(P, tools, [text]).calls[0].arguments == '{"n": "1", "s": 1}'


def test_malformed_and_prose_rules():
    assert P().parse('{"name": "f"} hi').content == '{"name": "f"} hi'  # not a call object
    assert P().parse('x {"name": "f", "parameters": {}}') == ParseResult('x {"name": "f", "parameters": {}}', ())
    # a non-call item after a call: prose resumes right after the call, separator kept
    assert P().parse(A + "; oops") == ParseResult("; oops", CALLS[:1])
    # the tag is dropped only in front of a call
    assert P().parse("<|python_tag|>print(1)") == ParseResult("<|python_tag|>print(1)", ())
    # array of calls (SGLang), newline-separated objects, marker inside a string
    assert P().parse("[" + A + ", " + B + "]").calls == CALLS
    assert P().parse(A + "\n" + B).calls == CALLS
    s = '{"name": "f", "parameters": {"q": "<|python_tag|>{}; x"}}'
    assert P().parse(s).calls == (ToolCall("f", '{"q": "<|python_tag|>{}; x"}'),)
    for text in (A + "; oops", "<|python_tag|>print(1)", s, A + ";", A + "<|eot_id|>"):
        assert_property(P, text)


# ----------------------------------------------------------------------------- planted bugs
class RawArgs(RawArgsFirst, P):
    pass


class Silent(SilentFinish, P):
    pass


class Greedy(P):
    """Planted bug (c): one greedy {.*} match over the whole output merges consecutive calls."""

    def parse(self, text):
        m = re.search(r"\{.*\}", text, re.S)
        if not m:
            return ParseResult(text)
        try:
            obj = json.loads(m.group())
            call = ToolCall(obj["name"], json.dumps(obj["parameters"], ensure_ascii=False))
        except (ValueError, KeyError, TypeError):
            return ParseResult(text)
        return ParseResult(text[: m.start()] + text[m.end() :], (call,))


TWO = PYTHON_TAG + A + "; " + B
TRAILING = A + "; " + B + "\n"  # finish() must release the whitespace held after the last call


@pytest.mark.parametrize("planted, text", [(RawArgs, TWO), (Silent, TRAILING), (Greedy, TWO)])
def test_planted_bug_is_caught(planted, text):
    assert check_stream_equals_whole(P, text, all_chunkings(P, text)) == []
    assert check_stream_equals_whole(planted, text, all_chunkings(planted, text)), planted.__name__


# ----------------------------------------------------------------------------- 1 MB unterminated
@pytest.mark.parametrize("body", ['{"name": "f", "parameters": {"a": "' + "x" * 1_000_000, PYTHON_TAG + "[" * 200_000 + "{" * 200_000], ids=["long-string", "deep-nesting"])
def test_one_megabyte_unterminated_call(body):
    long_unterminated_guard(P, body, content=None)


# ----------------------------------------------------------------------------- corpus
SKIPPED = {
    "prefill": "continue_final_message / template delta: the expected content includes text that is not in this output (prompt prefill)",
    "builtin": "Llama 3.1 built-in tool syntax <|python_tag|>NAME.call(...): llama.cpp only, not vLLM/SGLang llama3_json",
}


def _skip_reason(rec):
    ctx = rec.get("test_context") or {}
    if "continue_final_message" in (ctx.get("other") or []):
        return "prefill"
    if rec.get("expected_content") is not None and not rec.get("expected_calls") and rec["expected_content"].strip() != rec["text"].strip():
        return "prefill"  # e.g. the "?" record: a template-delta test whose expected text is the whole message
    if re.match(r"<\|python_tag\|>\w+\.call\(", rec["text"]):
        return "builtin"
    return None


def test_corpus_llama3_json():
    tally = check_corpus_records(P, "llama3_json.jsonl", 7, skip=_skip_reason, reasoning_open_rule=prompt_opened(None, flag=False))
    assert sorted(tally.skipped) == ["builtin"] * 2 + ["prefill"] * 4


# ----------------------------------------------------------------------------- public bugs
def test_public_bug_cases():
    check_public_bug_cases(P, ("llama3_json",))


def test_public_case_count():
    if not PUBLIC_BUGS.exists():
        pytest.skip("no public-bugs.jsonl")
    assert [c["id"] for c in public_bug_cases(("llama3_json",))] == ["B22"]
