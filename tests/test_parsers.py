"""Tool parsers: exact examples, the stream-equals-whole property, and planted bugs it must catch."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.parsers import (
    PARSERS,
    DeepSeekV31Parser,
    HermesParser,
    UnknownParserError,
    family_for_model,
    get_parser,
)
from replay.parsers._jsonscan import DONE, INVALID, JsonPrefix
from replay.parsers.base import CallDelta, ParseResult, ToolCall
from replay.parsers.deepseek_v31 import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, EOS, SEP
from replay.stream import check_stream_equals_whole, split
from strategies import (
    DUMP_STYLES,
    plain_chars,
    PROPERTY,
    RawArgsFirst,
    SilentFinish,
    all_chunkings,
    assert_property,
    json_objects,
    json_values,
    names,
    stream,
    text_with,
    with_reasoning,
    ws,
)

# ----------------------------------------------------------------------------- strategies
HERMES_MARKERS = ["<tool_call>", "</tool_call>", "<tool_", "</tool", "tool_call>"]
DS_MARKERS = [CALLS_BEGIN, CALL_BEGIN, SEP, CALL_END, CALLS_END, EOS, CALL_END[:5], "<\uff5c"]

@st.composite
def hermes_call(draw):
    obj = {"name": draw(names), draw(st.sampled_from(["arguments", "arguments", "parameters"])): draw(json_objects(HERMES_MARKERS))}
    body = json.dumps(obj, **draw(st.sampled_from(DUMP_STYLES)))
    return f"<tool_call>{draw(ws)}{body}{draw(ws)}</tool_call>"


hermes_malformed = st.one_of(
    st.builds(lambda t: f"<tool_call>{t}</tool_call>", text_with(HERMES_MARKERS)),
    st.sampled_from(
        [
            '<tool_call>{"name": 1, "arguments": {}}</tool_call>',
            '<tool_call>{"name": "f", "arguments": "x"}</tool_call>',
            '<tool_call>{"name": "f"}</tool_call>',
            '<tool_call>[1, 2]</tool_call>',
            '<tool_call>{"name": "f", "arguments": {}} junk</tool_call>',
            '<tool_call>{"name": "f", "arguments": {"a": 1.}}</tool_call>',
            "<tool_call>1.</tool_call>",
            '<tool_call>"</tool_call>"</tool_call>',
            "<tool_call>-</tool_call>",
        ]
    ),
)


@st.composite
def hermes_outputs(draw):
    parts = [draw(text_with(HERMES_MARKERS))]
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        parts.append(draw(st.one_of(hermes_call(), hermes_call(), hermes_malformed)))
        parts.append(draw(st.one_of(st.just(""), st.just("\n"), text_with(HERMES_MARKERS))))
    text = "".join(parts)
    ending = draw(st.sampled_from(["keep", "keep", "unterminated", "cut"]))
    if ending == "unterminated" and text.endswith("</tool_call>"):
        text = text[: -len("</tool_call>")] + draw(ws)
    elif ending == "cut" and text:
        text = text[: draw(st.integers(0, len(text)))]
    return text


@st.composite
def deepseek_call(draw):
    args = json.dumps(draw(json_objects(DS_MARKERS)), **draw(st.sampled_from(DUMP_STYLES)))
    name = draw(st.one_of(st.sampled_from(["get_time", "weather", "f"]), st.text(plain_chars, min_size=1, max_size=5)))
    return f"{CALL_BEGIN}{name}{SEP}{draw(ws)}{args}{draw(ws)}{CALL_END}"


ds_malformed = st.one_of(
    st.builds(lambda t: f"{CALL_BEGIN}f{SEP}{t}{CALL_END}", text_with(DS_MARKERS)),
    st.builds(lambda t: f"{CALL_BEGIN}{t}{CALL_END}", text_with(DS_MARKERS)),
    st.sampled_from(
        [
            f"{CALL_BEGIN}f{SEP}[1]{CALL_END}",
            f"{CALL_BEGIN}{SEP}{{}}{CALL_END}",
            f"{CALL_BEGIN}f{SEP}{{}} x{CALL_END}",
            f"{CALL_BEGIN}f{SEP}{{\"a\": 1{CALLS_END}{EOS}",
            f"{CALL_BEGIN}f{CALL_BEGIN}g{SEP}{{}}{CALL_END}",
        ]
    ),
)


@st.composite
def deepseek_outputs(draw):
    parts = [draw(text_with(DS_MARKERS))]
    n = draw(st.sampled_from([0, 1, 1, 2, 3]))
    if n:
        parts.append(draw(st.sampled_from([CALLS_BEGIN, CALLS_BEGIN, ""])))
        for _ in range(n):
            parts.append(draw(st.one_of(deepseek_call(), deepseek_call(), ds_malformed)))
            parts.append(draw(st.sampled_from(["", "", "\n", " x "])))
        parts.append(draw(st.sampled_from([CALLS_END, CALLS_END + EOS, ""])))
    parts.append(draw(st.one_of(st.just(""), st.just(EOS), text_with(DS_MARKERS))))
    text = "".join(parts)
    if draw(st.booleans()) and draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


# ----------------------------------------------------------------------------- the property
@PROPERTY
@given(with_reasoning(hermes_outputs(), HERMES_MARKERS))
def test_hermes_stream_equals_whole(case):
    text, reasoning_open = case
    assert_property(HermesParser, text, reasoning_open=reasoning_open)


@PROPERTY
@given(with_reasoning(deepseek_outputs(), DS_MARKERS))
def test_deepseek_v31_stream_equals_whole(case):
    text, reasoning_open = case
    assert_property(DeepSeekV31Parser, text, reasoning_open=reasoning_open)


@settings(max_examples=150, deadline=None)
@given(st.one_of(json_values(HERMES_MARKERS).map(json.dumps), st.text(alphabet='{}[]",:0123456789.eE+-tfnrulsaINfy \\u', max_size=12)))
def test_json_prefix_agrees_with_raw_decode(text):
    """The streaming side's incremental JSON scan accepts exactly what json.raw_decode accepts."""
    try:
        _, expected = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        expected = None
    for cut in sorted({0, len(text) // 2, len(text)}):
        scan = JsonPrefix()
        status = scan.feed(text[:cut])
        status = scan.feed(text[cut:])
        status = scan.close()
        if text[:1] in " \t\n\r":  # raw_decode does not skip leading whitespace; the parsers do
            continue
        if expected is None:
            assert status == INVALID, (text, scan.end)
        else:
            assert status == DONE and scan.end == expected, (text, status, scan.end, expected)


# ----------------------------------------------------------------------------- exact examples: hermes
H_CALL_A = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>'
H_CALL_B = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}\n</tool_call>'
H_CALLS = [ToolCall("get_weather", '{"city": "Paris", "days": 3}'), ToolCall("get_time", '{"tz": "Europe/Paris"}')]


def test_hermes_two_calls_in_one_delta():
    text = "Checking.\n" + H_CALL_A + "\n" + H_CALL_B
    assert HermesParser().parse(text) == ParseResult("Checking.\n\n", tuple(H_CALLS))
    got = stream(HermesParser, [text])
    assert [(c.index, c.name, c.arguments) for c in got.calls] == [(0, *H_CALLS[0].__dict__.values()), (1, *H_CALLS[1].__dict__.values())]
    assert got.content == "Checking.\n\n" and got.finish_reason == "tool_calls"


def test_hermes_call_end_and_next_start_in_one_delta():
    text = H_CALL_A + H_CALL_B
    cut1 = H_CALL_A.index("}}") + 2
    deltas = [text[:cut1], text[cut1 : len(H_CALL_A) + 14], text[len(H_CALL_A) + 14 :]]
    assert deltas[1].startswith("\n</tool_call><tool_call>")
    got = stream(HermesParser, deltas)
    assert [(c.name, c.arguments) for c in got.calls] == [(c.name, c.arguments) for c in H_CALLS]
    assert got.content == ""


def test_hermes_call_reported_by_finish():
    parser = HermesParser()
    text = '<tool_call>\n{"name": "f", "arguments": {"n": 12}}'
    first = parser.feed(text)
    assert not first  # the number could go on, and an end marker may follow
    last = parser.finish()
    assert last.calls == [CallDelta(0, "f", '{"n": 12}')] and last.content == ""


def test_hermes_zero_arg_call_gives_empty_object():
    text = '<tool_call>\n{"name": "current_time", "arguments": {}}\n</tool_call>'
    assert HermesParser().parse(text).calls == (ToolCall("current_time", "{}"),)
    got = stream(HermesParser, split(text, "char", markers=HermesParser.markers))
    assert [(c.name, c.arguments) for c in got.calls] == [("current_time", "{}")]


def test_hermes_parameters_synonym_and_marker_in_string():
    text = '<tool_call>{"name": "w", "parameters": {"s": "a</tool_call>b"}}</tool_call>tail'
    assert HermesParser().parse(text) == ParseResult("tail", (ToolCall("w", '{"s": "a</tool_call>b"}'),))


def test_hermes_unterminated_call():
    valid = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n'
    assert HermesParser().parse(valid) == ParseResult("", (ToolCall("f", '{"a": 1}'),))
    truncated = 'x<tool_call>\n{"name": "f", "arguments": {"a": '
    assert HermesParser().parse(truncated) == ParseResult(truncated, ())
    for text in (valid, truncated):
        assert_property(HermesParser, text)


def test_hermes_marker_split_across_deltas():
    deltas = ["Hi <tool", '_call>{"name": "f", "arguments": {}}</tool', "_call> bye <tool_"]
    p = HermesParser()
    events = [p.feed(d) for d in deltas]
    assert events[0].content == "Hi "  # "<tool" held back
    assert events[2].calls == [CallDelta(0, "f", "{}")] and events[2].content == " bye "
    assert p.finish().content == "<tool_"


def test_hermes_malformed_json_is_content_and_parsing_goes_on():
    bad = '<tool_call>{"name": "f", "arguments": {"a": 1,}}</tool_call>'
    good = '<tool_call>{"name": "g", "arguments": {"b": [true, null]}}</tool_call>'
    assert HermesParser().parse(bad + "\n" + good) == ParseResult(bad + "\n", (ToolCall("g", '{"b": [true, null]}'),))
    for text in (bad + "\n" + good, '<tool_call>{"name": "f", "arguments": {}} x</tool_call>', "<tool_call>oops"):
        assert_property(HermesParser, text)
    assert HermesParser().parse("<tool_call>oops").content == "<tool_call>oops"


def test_hermes_content_is_verbatim_and_reasoning_split_off():
    text = "  <think>\nhm <tool_call>\n</think>\n\n" + H_CALL_A + "\n after <think>x</think> "
    whole = HermesParser().parse(text)
    # the leading reasoning (with the <tool_call> it mentions) is split off, with the whitespace after
    # </think>; a later <think> is content
    assert (whole.reasoning, whole.content) == ("\nhm <tool_call>\n", "\n after <think>x</think> ")
    assert len(whole.calls) == 1
    assert_property(HermesParser, text)
    opened = HermesParser(reasoning_open=True).parse("plan\n</think>\n" + H_CALL_A)
    assert (opened.reasoning, opened.content, len(opened.calls)) == ("plan\n", "", 1)


# ----------------------------------------------------------------------------- exact examples: deepseek
DS_TWO = (
    f"{CALLS_BEGIN}{CALL_BEGIN}get_weather{SEP}{{\"city\":\"Paris\", \"days\": 3}}{CALL_END}"
    f"{CALL_BEGIN}get_time{SEP}{{\"tz\": \"Europe/Paris\"}}{CALL_END}{CALLS_END}{EOS}"
)


def test_deepseek_tokens_built_from_code_points():
    assert CALL_BEGIN == "<\uff5ctool\u2581call\u2581begin\uff5c>"
    assert EOS == "<\uff5cend\u2581of\u2581sentence\uff5c>"


def test_deepseek_two_calls_in_one_delta():
    whole = DeepSeekV31Parser().parse("Sure." + DS_TWO)
    assert whole == ParseResult("Sure.", tuple(H_CALLS))
    got = stream(DeepSeekV31Parser, ["Sure." + DS_TWO])
    assert [(c.index, c.name, c.arguments) for c in got.calls] == [(0, "get_weather", H_CALLS[0].arguments), (1, "get_time", H_CALLS[1].arguments)]
    assert got.content == "Sure." and got.finish_reason == "tool_calls"


def test_deepseek_call_end_and_next_start_in_one_delta():
    i = DS_TWO.index(CALL_END)
    deltas = [DS_TWO[:i], DS_TWO[i : i + len(CALL_END) + len(CALL_BEGIN) + 3], DS_TWO[i + len(CALL_END) + len(CALL_BEGIN) + 3 :]]
    got = stream(DeepSeekV31Parser, deltas)
    assert [c.name for c in got.calls] == ["get_weather", "get_time"] and got.content == ""


def test_deepseek_call_reported_by_finish_and_zero_args():
    p = DeepSeekV31Parser()
    assert not p.feed(f"{CALLS_BEGIN}{CALL_BEGIN}now{SEP}{{}}")
    assert p.finish().calls == [CallDelta(0, "now", "{}")]


def test_deepseek_unterminated_and_malformed():
    trunc = f"a{CALLS_BEGIN}{CALL_BEGIN}f{SEP}{{\"x\": "
    assert DeepSeekV31Parser().parse(trunc) == ParseResult(f"a{CALL_BEGIN}f{SEP}{{\"x\": ", ())
    bad = f"{CALL_BEGIN}f{SEP}{{\"x\": }}{CALL_END}{CALL_BEGIN}g{SEP}{{}}{CALL_END}{EOS}"
    assert DeepSeekV31Parser().parse(bad) == ParseResult(f"{CALL_BEGIN}f{SEP}{{\"x\": }}{CALL_END}", (ToolCall("g", "{}"),))
    for text in (trunc, bad):
        assert_property(DeepSeekV31Parser, text)


def test_deepseek_marker_split_and_eos_never_content():
    deltas = ["ok", CALLS_END[:4], CALLS_END[4:] + EOS[:3], EOS[3:]]
    got = stream(DeepSeekV31Parser, deltas)
    assert got.content == "ok" and got.finish_reason == "stop"
    assert DeepSeekV31Parser().parse("".join(deltas)).content == "ok"


# ----------------------------------------------------------------------------- planted bugs
class HermesRawArgs(RawArgsFirst, HermesParser):
    pass


class HermesSilentFinish(SilentFinish, HermesParser):
    pass


class HermesGreedy(HermesParser):
    """Planted bug (c): the whole-text parse matches greedily, merging consecutive calls."""

    def parse(self, text):
        m = re.search(r"<tool_call>(.*)</tool_call>", text, re.S)
        if not m:
            return ParseResult(text)
        try:
            obj = json.loads(m.group(1))
            call = ToolCall(obj["name"], json.dumps(obj["arguments"], ensure_ascii=False))
        except (ValueError, KeyError, TypeError):
            return ParseResult(text)
        return ParseResult(text[: m.start()] + text[m.end() :], (call,))


class DeepSeekRawArgs(RawArgsFirst, DeepSeekV31Parser):
    pass


class DeepSeekSilentFinish(SilentFinish, DeepSeekV31Parser):
    pass


class DeepSeekGreedy(DeepSeekV31Parser):
    """Planted bug (c): greedy argument match runs from the first call into the next one."""

    def parse(self, text):
        calls = []
        for m in re.finditer(re.escape(CALL_BEGIN) + "(.*?)" + re.escape(SEP) + "(.*)" + re.escape(CALL_END), text, re.S):
            try:
                calls.append(ToolCall(m.group(1), json.dumps(json.loads(m.group(2)), ensure_ascii=False)))
            except ValueError:
                return ParseResult(text.replace(CALLS_BEGIN, "").replace(CALLS_END, "").replace(EOS, ""))
        content = re.sub(re.escape(CALL_BEGIN) + ".*" + re.escape(CALL_END), "", text, flags=re.S)
        return ParseResult(content.replace(CALLS_BEGIN, "").replace(CALLS_END, "").replace(EOS, ""), tuple(calls))


H_PLANT_TEXT = "Let me check.\n" + H_CALL_A + "\n" + H_CALL_B
H_UNTERMINATED = H_CALL_A + '\n<tool_call>\n{"name": "g", "arguments": {"n": 1}}'
DS_UNTERMINATED = f"{CALLS_BEGIN}{CALL_BEGIN}f{SEP}{{\"a\":1}}{CALL_END}{CALL_BEGIN}g{SEP}{{\"n\": 2}}"


@pytest.mark.parametrize(
    "planted, text",
    [
        (HermesRawArgs, H_PLANT_TEXT),
        (HermesSilentFinish, H_UNTERMINATED),
        (HermesGreedy, H_PLANT_TEXT),
        (DeepSeekRawArgs, DS_TWO),
        (DeepSeekSilentFinish, DS_UNTERMINATED),
        (DeepSeekGreedy, DS_TWO),
    ],
)
def test_planted_bug_is_caught(planted, text):
    # the reference parser the planted class derives from: the first of its classes from replay.parsers
    reference = next(c for c in planted.__mro__ if c.__module__.startswith("replay.parsers"))
    assert reference in (HermesParser, DeepSeekV31Parser)
    assert check_stream_equals_whole(reference, text, all_chunkings(reference, text)) == []
    failures = check_stream_equals_whole(planted, text, all_chunkings(planted, text))
    assert failures, f"{planted.__name__} was not caught"
    assert len(failures[0].deltas) == min(len(f.deltas) for f in failures)
    assert failures[0].chunking in failures[0].describe()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hermes_call(), min_size=1, max_size=3).map("\n".join))
def test_planted_raw_args_caught_on_generated_outputs(text):
    """Bug (a) always shows: the join is raw text + dumped text, never the dumped text alone."""
    assert check_stream_equals_whole(HermesRawArgs, text, ["whole", "char"])


# ----------------------------------------------------------------------------- registry
def test_registry_aliases():
    for alias in ("hermes", "qwen", "qwen25", "qwen3"):
        assert PARSERS[alias] is HermesParser and get_parser(alias) is HermesParser
    for alias in ("deepseek_v31", "deepseekv31", "deepseek-v3.1"):
        assert get_parser(alias) is DeepSeekV31Parser
    with pytest.raises(UnknownParserError, match="hermes"):
        get_parser("nope")
    # every family is registered under its own name, and every alias leads to a family
    from replay.parsers import families

    assert len(families()) == 17
    for cls in families():
        assert get_parser(cls.name) is cls and cls.markers and cls.covers
    assert {cls.name for cls in PARSERS.values()} == {cls.name for cls in families()}


def test_get_parser_plugin(tmp_path):
    good = tmp_path / "myparser.py"
    good.write_text("from replay.parsers.hermes import HermesParser\nclass P(HermesParser):\n    name = 'mine'\nNOT = 3\n")
    assert get_parser(f"{good}:P").name == "mine"
    with pytest.raises(UnknownParserError):
        get_parser(f"{good}:NOT")
    assert issubclass(UnknownParserError, ValueError)


@pytest.mark.parametrize(
    "model, family",
    [
        ("Qwen/Qwen2.5-7B-Instruct", "hermes"),
        ("Qwen/Qwen3-8B", "hermes"),
        ("qwen3-235b-a22b-instruct-2507", "hermes"),
        ("Qwen/QwQ-32B", "hermes"),
        ("NousResearch/Hermes-3-Llama-3.1-8B", "hermes"),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_coder"),
        ("Qwen/Qwen3.5-4B", "qwen3_coder"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek_v31"),
        ("deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek_v31"),
        ("deepseek-v3.1", "deepseek_v31"),
        ("deepseek-ai/DeepSeek-V3", "deepseek_v3"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek_v3"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "deepseek_v3"),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek_v32"),
        ("deepseek-ai/DeepSeek-V4", "deepseek_v32"),
        ("moonshotai/Kimi-K2-Instruct", "kimi_k2"),
        ("moonshotai/Kimi-K2-Thinking", "kimi_k2"),
        ("zai-org/GLM-4.6", "glm45"),
        ("zai-org/GLM-4.5-Air", "glm45"),
        ("THUDM/glm-4-9b-chat", None),
        ("openai/gpt-oss-20b", "harmony"),
        ("google/gemma-4-31b-it", "gemma4"),
        ("google/gemma-2-2b-it", None),
        ("MiniMaxAI/MiniMax-M2", "minimax_m2"),
        ("ByteDance-Seed/Seed-OSS-36B-Instruct", "seed_oss"),
        ("ibm-granite/granite-3.3-8b-instruct", "granite"),
        ("ibm-granite/granite-4.0-h-small", "granite4"),
        ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistral"),
        ("mistralai/Devstral-Small-2507", "mistral"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3_json"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama3_json"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "pythonic"),
        ("LiquidAI/LFM2-8B-A1B", "pythonic"),
        ("gpt-4o", None),
        (None, None),
    ],
)
def test_family_for_model(model, family):
    assert family_for_model(model) == family
