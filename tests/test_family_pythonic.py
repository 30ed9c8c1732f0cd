"""Pythonic tool parser (Llama 3.2 / 4, LFM2): the stream-equals-whole property, exact examples,
planted bugs, a 1 MB unterminated call and the shared corpus."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.parsers.base import CallDelta, ParseResult, ToolCall
from replay.parsers.pythonic import PY_END, PY_START, TC_END, TC_START, PythonicParser, parse_call_list
from replay.stream import check_stream_equals_whole, replay_stream, split
from strategies import (
    PROPERTY,
    DropFinishCalls,
    RawArgsFirst,
    all_chunkings,
    assert_property,
    check_corpus_records,
    long_unterminated_guard,
    opened,
    stream,
    text_with,
)

P = PythonicParser
MARKERS = [TC_START, TC_END, PY_START, PY_END, "<think>", "</think>", "<|tool_call", "_end|>", "[", "]", "(", ")", "'", '"']


POpen = opened(PythonicParser)  # the reasoning section opened by the prompt


# ----------------------------------------------------------------------------- strategy
sp = st.sampled_from(["", "", " ", "\n", " \t"])
py_strings = st.one_of(st.text(max_size=8), st.sampled_from(['"', "'", "\\", "\n", "é", "😀", TC_END, "]", ")", "<|python_end|>"]))


def _py_str(draw):
    s = draw(py_strings)
    return draw(st.sampled_from([repr, json.dumps, lambda x: json.dumps(x, ensure_ascii=False)]))(s)


@st.composite
def py_scalar(draw):
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return _py_str(draw)
    if kind == 1:
        return repr(draw(st.integers(-(10**12), 10**12)))
    if kind == 2:
        return repr(draw(st.floats(allow_nan=False, allow_infinity=False)))
    return draw(st.sampled_from(["True", "False", "None", "true", "false", "null"]))


def py_values():
    def containers(inner):
        seq = st.lists(inner, max_size=3)
        return st.one_of(
            seq.map(lambda xs: "[" + ", ".join(xs) + "]"),
            seq.map(lambda xs: "(" + ", ".join(xs) + ("," if len(xs) == 1 else "") + ")"),
            st.lists(st.tuples(st.builds(lambda s: json.dumps(s), st.text(max_size=4)), inner), max_size=3).map(
                lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"
            ),
        )

    return st.recursive(py_scalar(), containers, max_leaves=6)


ident = st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True)


@st.composite
def py_call(draw):
    name = draw(st.one_of(st.sampled_from(["get_weather", "f", "Calendar.create_event", "é_x"]), ident))
    keys = draw(st.lists(ident, max_size=3, unique=True))
    args = [f"{k}{draw(sp)}={draw(sp)}{draw(py_values())}" for k in keys]
    trailing = "," if args and draw(st.booleans()) else ""
    return f"{name}{draw(sp)}({draw(sp)}{(',' + draw(sp)).join(args)}{trailing})"


@st.composite
def call_list(draw):
    calls = draw(st.lists(py_call(), min_size=1, max_size=3))
    return "[" + draw(sp) + ("," + draw(sp)).join(calls) + draw(sp) + "]"


malformed_list = st.one_of(
    text_with(MARKERS),
    st.sampled_from(
        [
            "[]",
            "[f(1)]",
            "[f(a=1]",
            "[f(a=x)]",
            "[f(a=1, a=2)]",
            '[f(a="unterminated)]',
            "[f(a='x\ny')]",
            "[f(a=1)",
            "[f(a==1)]",
            "[f(a={1: 2})]",
            "[f(a=1e999)]",
            "[f(a=-True)]",
            "[link text](url)",
            "[1, 2]",
            '[f(a="\\N")]',
            "f(a=1)",
        ]
    ),
)


@st.composite
def wrapped(draw):
    start, end = draw(st.sampled_from([(TC_START, TC_END), (TC_START, TC_END), (PY_START, PY_END)]))
    inner = draw(st.one_of(call_list(), call_list(), malformed_list))
    return start + draw(sp) + inner + draw(sp) + draw(st.sampled_from([end, end, end, "", " junk" + end]))


@st.composite
def pythonic_outputs(draw):
    parts = []
    if draw(st.integers(0, 3)) == 0:
        parts.append("<think>" + draw(text_with(MARKERS)) + draw(st.sampled_from(["</think>", "</think>\n\n", ""])))
    if draw(st.booleans()):
        parts.append(draw(sp) + draw(st.one_of(call_list(), malformed_list)))
    for _ in range(draw(st.sampled_from([0, 1, 1, 2]))):
        parts.append(draw(st.one_of(st.just(""), text_with(MARKERS))))
        parts.append(draw(wrapped()))
    parts.append(draw(st.one_of(st.just(""), text_with(MARKERS))))
    text = "".join(parts)
    if draw(st.integers(0, 3)) == 0 and text:
        text = text[: draw(st.integers(0, len(text)))]
    return text


@settings(PROPERTY, max_examples=100)
@given(pythonic_outputs())
def test_pythonic_stream_equals_whole(text):
    assert_property(P, text)


@settings(PROPERTY, max_examples=30)
@given(pythonic_outputs())
def test_pythonic_reasoning_open_stream_equals_whole(text):
    assert_property(POpen, text)


# ----------------------------------------------------------------------------- exact examples
TWO = '[get_weather(city="Paris", days=3), get_time(tz=\'Europe/Paris\')]'
CALLS = (ToolCall("get_weather", '{"city": "Paris", "days": 3}'), ToolCall("get_time", '{"tz": "Europe/Paris"}'))


def calls_of(got):
    return tuple(ToolCall(c.name, c.arguments) for c in got.calls)


def test_values_are_python_literals():
    text = "[f(a=True, b=None, c=(1, 2), d=[{'k': -1.5e3}], e='é\\n', f=null, g=(7))]"
    assert P().parse(text).calls == (ToolCall("f", '{"a": true, "b": null, "c": [1, 2], "d": [{"k": -1500.0}], "e": "é\\n", "f": null, "g": 7}'),)


def test_start_marker_split_across_two_deltas():
    p = P()
    e1 = p.feed("Checking. <|tool_call")
    assert e1.content == "Checking. " and not e1.calls
    e2 = p.feed("_start|>" + TWO + "<|tool_call")
    assert not e2  # the list is complete, the end marker may follow
    e3 = p.feed("_end|> ok")
    assert calls_of(e3) == CALLS and e3.content == " ok"
    assert not p.finish()


def test_several_calls_and_blocks_in_one_delta():
    text = "A" + TC_START + TWO + TC_END + "B" + TC_START + "[now()]" + TC_END
    want = ParseResult("AB", CALLS + (ToolCall("now", "{}"),))
    assert P().parse(text) == want
    got = stream(P, [text])
    assert calls_of(got) == want.calls and got.content == "AB" and [c.index for c in got.calls] == [0, 1, 2]


def test_block_end_and_next_block_start_in_one_delta():
    b1, b2 = TC_START + "[f(a=1)]", TC_START + "[g(b=2)]" + TC_END
    deltas = [b1, TC_END + "\n" + TC_START + "[g(", "b=2)]" + TC_END]
    p = P()
    events = [p.feed(d) for d in deltas]
    assert events[1].calls == [CallDelta(0, "f", '{"a": 1}')] and events[1].content == "\n"
    assert events[2].calls == [CallDelta(1, "g", '{"b": 2}')]
    assert P().parse(b1 + TC_END + "\n" + b2).calls == (ToolCall("f", '{"a": 1}'), ToolCall("g", '{"b": 2}'))


def test_unterminated_block_reported_by_finish():
    p = P()
    assert not p.feed(TC_START + "[f(a=1), g()]")
    last = p.finish()
    assert last.calls == [CallDelta(0, "f", '{"a": 1}'), CallDelta(1, "g", "{}")] and last.content == ""


def test_bare_list_reported_at_its_bracket():
    p = P()
    assert not p.feed(TWO[:-1])
    assert calls_of(p.feed("]")) == CALLS
    assert p.finish().content == ""


def test_call_cut_off_by_end_of_stream():
    text = TC_START + "[special_function(arg1="
    assert P().parse(text) == ParseResult(text, ())
    got = stream(P, split(text, "char", markers=P.markers))
    assert got.calls == [] and got.content == text and got.finish_reason == "stop"


def test_zero_arg_call():
    assert P().parse("[empty_args()]").calls == (ToolCall("empty_args", "{}"),)
    assert calls_of(stream(P, split(TC_START + "[empty_args()]" + TC_END, "char", markers=P.markers))) == (ToolCall("empty_args", "{}"),)


def test_values_typed_by_literal_syntax_not_schema():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}}}]
    text = '[f(n="1", s=1)]'
    assert P(tools).parse(text).calls == (ToolCall("f", '{"n": "1", "s": 1}'),)
    assert replay_stream(P, tools, [text]).calls[0].arguments == '{"n": "1", "s": 1}'


def test_reasoning_split():
    text = "<think>maybe [f(a=1)]?</think>\n\nSure." + TC_START + "[f(a=1)]" + TC_END
    assert P().parse(text) == ParseResult("Sure.", (ToolCall("f", '{"a": 1}'),), "maybe [f(a=1)]?")
    got = stream(P, ["<think>maybe [f(", "a=1)]?</thi", "nk>\n\nSure." + TC_START, "[f(a=1)]" + TC_END])
    assert got.reasoning == "maybe [f(a=1)]?" and got.content == "Sure." and calls_of(got) == (ToolCall("f", '{"a": 1}'),)
    opened = POpen().parse("still thinking</think>[g()]")
    assert opened == ParseResult("", (ToolCall("g", "{}"),), "still thinking")


def test_malformed_rules():
    assert P().parse("[f(1)] x") == ParseResult("[f(1)] x", ())  # positional argument
    assert P().parse("Hi [f(a=1)]") == ParseResult("Hi [f(a=1)]", ())  # bare list only at the start
    assert P().parse(TWO + " trailing") == ParseResult(" trailing", CALLS)
    bad = TC_START + '[f(a="' + TC_END + '")] junk' + TC_END + "tail"
    assert P().parse(bad) == ParseResult(bad, ())  # not a call block: cut at the first end marker
    ok = TC_START + '[f(a="' + TC_END + '")]' + TC_END
    assert P().parse(ok).calls == (ToolCall("f", json.dumps({"a": TC_END})),)  # string-aware when valid
    assert parse_call_list("[f(a=[1, 2])] rest", 0) == ([("f", '{"a": [1, 2]}', "a=[1, 2]")], 13)
    for text in ("[f(1)] x", bad, ok, TWO + " trailing", "[don't] stop\nhere", TC_START + "hello" + TC_END + "[f()]"):
        assert_property(P, text)


# ----------------------------------------------------------------------------- planted bugs
class RawArgs(RawArgsFirst, P):
    pass


class DropAtFinish(DropFinishCalls, P):
    pass


class Greedy(P):
    """Planted bug (c): a greedy start.*end match over the whole output merges two blocks."""

    def parse(self, text):
        m = re.search(re.escape(TC_START) + r"(.*)" + re.escape(TC_END), text, re.S)
        if not m:
            return ParseResult(text)
        found = parse_call_list(m.group(1), 0) if m.group(1).startswith("[") else None
        if found is None:
            return ParseResult(text)
        return ParseResult(text[: m.start()] + text[m.end() :], tuple(ToolCall(n, a) for n, a, _ in found[0]))


BLOCKS = "Let me check." + TC_START + TWO + TC_END + " and " + TC_START + "[now()]" + TC_END
UNTERMINATED = TC_START + TWO


@pytest.mark.parametrize("planted, text", [(RawArgs, BLOCKS), (DropAtFinish, UNTERMINATED), (Greedy, BLOCKS)])
def test_planted_bug_is_caught(planted, text):
    assert check_stream_equals_whole(P, text, all_chunkings(P, text)) == []
    assert check_stream_equals_whole(planted, text, all_chunkings(planted, text)), planted.__name__


# ----------------------------------------------------------------------------- 1 MB unterminated
@pytest.mark.parametrize(
    "body",
    [TC_START + '[f(a="' + "x" * 1_000_000, '[f(a="' + "x\\" * 500_000, TC_START + "[f(a=" + "[" * 300_000 + "(" * 300_000],
    ids=["wrapped-string", "bare-escapes", "deep-nesting"],
)
def test_one_megabyte_unterminated_call(body):
    long_unterminated_guard(P, body)


# ----------------------------------------------------------------------------- corpus
SKIPPED = {
    "prefill": "continue_final_message: the expected content/reasoning includes text of the prompt, not of this output",
    "partial": "partial (cut-off) output: llama.cpp's expected partial call is not a call under the module rules",
    "escape": "the corpus keeps the Python escape \\n undecoded (llama.cpp); Python literal semantics decode it to a newline",
}


def _skip_reason(rec):
    ctx = rec.get("test_context") or {}
    if "continue_final_message" in (ctx.get("other") or []):
        return "prefill"
    if rec.get("partial"):
        return "partial"
    if "\\n" in rec["text"] and rec["text"].count("(code=") == 1:
        return "escape"
    return None


def test_corpus_lfm2_pythonic():
    tally = check_corpus_records(P, "lfm2_pythonic.jsonl", 17, skip=_skip_reason)
    assert sorted(tally.skipped) == ["escape", "partial", "prefill", "prefill"]
