"""gpt-oss Harmony parser: property, exact examples, planted bugs, 1 MB guard, corpus, public bugs."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.parsers.base import CallDelta, ParseResult, ToolCall
from replay.parsers.harmony import CALL, CHANNEL, CONSTRAIN, END, MESSAGE, RETURN, START, HarmonyParser
from replay.stream import check_stream_equals_whole, split
from strategies import (
    DUMP_STYLES,
    OUTPUTS,
    DropFinishCalls,
    RawArgsFirst,
    all_chunkings,
    assert_property,
    check_corpus_records,
    check_public_bug_cases,
    json_objects,
    long_unterminated_guard,
    opened,
    prompt_opened,
    stream,
    text_with,
    ws,
)

H_MARKERS = [START, END, MESSAGE, CHANNEL, CONSTRAIN, RETURN, CALL, "<|", "<|cha", "|>", " to=functions.x"]


# ----------------------------------------------------------------------------- strategy
FAMILY_PROPERTY = settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])
names = st.one_of(st.sampled_from(["get_weather", "f", "a.b", "lookup-x"]), st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=5))


@st.composite
def call_message(draw):
    name = draw(names)
    recipient = f"to=functions.{name}"
    ctype = draw(st.sampled_from([f" {CONSTRAIN}json", f"{CONSTRAIN}json", " json", ""]))
    channel = draw(st.sampled_from(["commentary", "commentary", "analysis"]))
    if draw(st.booleans()):
        header = f"{START}assistant {recipient}{CHANNEL}{channel}{ctype}"
    else:
        header = f"{START}assistant{CHANNEL}{channel} {recipient}{ctype}"
    body = draw(st.one_of(json_objects(["<", "|", "to=", "{"]).map(lambda o: json.dumps(o)), st.builds(lambda o, kw: json.dumps(o, **kw), json_objects(["x"]), st.sampled_from(DUMP_STYLES)), st.just("{}"), st.just("")))
    body = draw(ws) + body + draw(ws)
    return f"{header}{MESSAGE}{body}{draw(st.sampled_from([CALL, CALL, END, '']))}"


@st.composite
def other_message(draw):
    channel = draw(st.sampled_from(["analysis", "final", "commentary", "weird", ""]))
    header = draw(st.sampled_from([f"{START}assistant", f"{START}user", f"{START}browser.search to=assistant", ""]))
    header += (f"{CHANNEL}{channel}" if channel else "") + draw(st.sampled_from(["", " to=browser.search", " to=assistant", " <|constrain|>json"]))
    body = draw(text_with(H_MARKERS))
    return f"{header}{MESSAGE}{body}{draw(st.sampled_from([END, END, RETURN, CALL, '']))}"


malformed = st.sampled_from(
    [
        f"{START}assistant{CHANNEL}commentary to=functions.f{MESSAGE}{{\"a\": 1,}}{CALL}",
        f"{START}assistant{CHANNEL}commentary to=functions.f{MESSAGE}[1]{CALL}",
        f"{START}assistant{CHANNEL}commentary to=functions.f{MESSAGE}{{}} junk{CALL}",
        f"{START}assistant{CHANNEL}commentary to=functions.{MESSAGE}{{}}{CALL}",
        f"{START}assistant{CHANNEL}commentary to=functions.f{MESSAGE}{{\"a\": \"x{END}",
        f"{CHANNEL}final{MESSAGE}a{CHANNEL}analysis{MESSAGE}b",
        f"{MESSAGE}{MESSAGE}{CONSTRAIN}x",
    ]
)


@st.composite
def harmony_outputs(draw):
    parts = []
    first = draw(st.sampled_from(["analysis", "final", "call", "text", "none"]))
    if first == "analysis":
        parts.append(f"{CHANNEL}analysis{MESSAGE}{draw(text_with(H_MARKERS))}{END}")
    elif first == "final":
        parts.append(f"{CHANNEL}final{MESSAGE}{draw(text_with(H_MARKERS))}")
    elif first == "call":
        parts.append(draw(call_message())[len(START) + len("assistant") :])
    elif first == "text":
        parts.append(draw(text_with(H_MARKERS)))
    for _ in range(draw(st.sampled_from([0, 1, 2, 3]))):
        parts.append(draw(st.one_of(call_message(), call_message(), other_message(), malformed)))
    text = "".join(parts)
    if draw(st.booleans()) and draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


@FAMILY_PROPERTY
@given(harmony_outputs())
def test_harmony_stream_equals_whole(text):
    assert_property(HarmonyParser, text)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(harmony_outputs())
def test_harmony_reasoning_open_stream_equals_whole(text):
    assert_property(opened(HarmonyParser), text)


# ----------------------------------------------------------------------------- exact examples
CALL_A = f"{START}assistant{CHANNEL}commentary to=functions.get_weather {CONSTRAIN}json{MESSAGE}{{\"city\":\"Paris\",\"days\":3}}{CALL}"
CALL_B = f"{START}assistant to=functions.get_time{CHANNEL}commentary{CONSTRAIN}json{MESSAGE}{{\"tz\": \"Europe/Paris\"}}{CALL}"
THINK = f"{CHANNEL}analysis{MESSAGE}Need weather and time.{END}"
TWO = THINK + CALL_A + CALL_B
TWO_CALLS = (ToolCall("get_weather", '{"city": "Paris", "days": 3}'), ToolCall("get_time", '{"tz": "Europe/Paris"}'))


def test_two_calls_and_reasoning_whole_and_one_delta():
    assert HarmonyParser().parse(TWO) == ParseResult("", TWO_CALLS, "Need weather and time.")
    got = stream(HarmonyParser, [TWO])
    assert [(c.index, c.name, c.arguments) for c in got.calls] == [(0, *TWO_CALLS[0].__dict__.values()), (1, *TWO_CALLS[1].__dict__.values())]
    assert got.reasoning == "Need weather and time." and got.content == "" and got.finish_reason == "tool_calls"


def test_marker_split_across_deltas():
    text = THINK + CALL_A
    i = text.index(MESSAGE, len(THINK))
    deltas = [text[: i + 4], text[i + 4 :]]  # "<|me" | "ssage|>{...}"
    p = HarmonyParser()
    events = [p.feed(d) for d in deltas]
    assert events[0].reasoning == "Need weather and time." and not events[0].calls
    assert events[1].calls == [CallDelta(0, "get_weather", '{"city": "Paris", "days": 3}')]
    assert not p.finish()


def test_call_end_and_next_start_in_one_delta():
    text = CALL_A + CALL_B
    k = len(CALL_A)
    deltas = [text[: k - 3], text[k - 3 : k + 20], text[k + 20 :]]
    got = stream(HarmonyParser, deltas)
    assert [(c.name, c.arguments) for c in got.calls] == [(c.name, c.arguments) for c in TWO_CALLS]


def test_call_completed_only_at_finish():
    p = HarmonyParser()
    text = f"{CHANNEL}commentary to=functions.f {CONSTRAIN}json{MESSAGE}{{\"n\": 12}}"
    assert not p.feed(text)  # no terminator yet: the message may go on
    assert p.finish().calls == [CallDelta(0, "f", '{"n": 12}')]
    assert HarmonyParser().parse(text).calls == (ToolCall("f", '{"n": 12}'),)


def test_call_cut_off_is_content_not_call():
    text = f"{CHANNEL}commentary to=functions.f{MESSAGE}{{\"n\": 1"
    assert HarmonyParser().parse(text) == ParseResult('{"n": 1', ())
    assert_property(HarmonyParser, text)


def test_zero_arg_calls():
    for body in ("{}", "", " \n"):
        text = f"{CHANNEL}commentary to=functions.now{MESSAGE}{body}{CALL}"
        assert HarmonyParser().parse(text).calls == (ToolCall("now", "{}"),), body
        assert_property(HarmonyParser, text)
    # an empty body not ended by <|call|> is not a call
    assert HarmonyParser().parse(f"{CHANNEL}commentary to=functions.now{MESSAGE}").calls == ()


def test_reasoning_split_and_reasoning_open():
    text = f"{CHANNEL}analysis{MESSAGE}hmm{END}{START}assistant{CHANNEL}final{MESSAGE}Hi!{RETURN}"
    assert HarmonyParser().parse(text) == ParseResult("Hi!", (), "hmm")
    cont = f"still thinking{END}{START}assistant{CHANNEL}final{MESSAGE}Hi!"
    assert opened(HarmonyParser)().parse(cont) == ParseResult("Hi!", (), "still thinking")
    got = stream(opened(HarmonyParser), split(cont, "char", markers=HarmonyParser.markers))
    assert (got.reasoning, got.content) == ("still thinking", "Hi!")


def test_preamble_builtin_tools_and_foreign_roles():
    text = (
        f"{CHANNEL}commentary{MESSAGE}Let me look.{END}"
        f"{START}assistant{CHANNEL}analysis to=browser.search code{MESSAGE}{{\"q\": 1}}{CALL}"
        f"{START}browser.search to=assistant{CHANNEL}commentary{MESSAGE}{{\"r\": 2}}{END}"
        f"{START}assistant{CHANNEL}commentary to=assistant{CHANNEL}final{MESSAGE}Done."
    )
    assert HarmonyParser().parse(text) == ParseResult("Let me look.Done.", ())


def test_plain_text_without_markers_is_content():
    assert HarmonyParser().parse("just text <| not a marker") == ParseResult("just text <| not a marker", ())
    assert_property(HarmonyParser, "just text <|")


# ----------------------------------------------------------------------------- planted bugs
class HarmonyRawArgs(RawArgsFirst, HarmonyParser):
    pass


class HarmonyDropFinish(DropFinishCalls, HarmonyParser):
    pass


class HarmonyGreedy(HarmonyParser):
    """Planted bug (c): the whole-text parse takes everything from the first recipient to the last
    ``<|call|>`` as one body, merging consecutive calls."""

    def parse(self, text):
        m = re.search(r"to=functions\.(\w+).*?<\|message\|>(.*)<\|call\|>", text, re.S)
        if not m:
            return super().parse(text)
        try:
            call = ToolCall(m.group(1), json.dumps(json.loads(m.group(2)), ensure_ascii=False))
        except ValueError:
            return ParseResult("", (), "")
        return ParseResult("", (call,), super().parse(text).reasoning)


UNTERMINATED = THINK + CALL_A + f"{START}assistant{CHANNEL}commentary to=functions.g{MESSAGE}{{\"n\": 1}}"


@pytest.mark.parametrize(
    "planted, text",
    [(HarmonyRawArgs, TWO), (HarmonyDropFinish, UNTERMINATED), (HarmonyGreedy, TWO)],
)
def test_planted_bug_is_caught(planted, text):
    assert check_stream_equals_whole(HarmonyParser, text, all_chunkings(HarmonyParser, text)) == []
    assert check_stream_equals_whole(planted, text, all_chunkings(planted, text)), f"{planted.__name__} was not caught"


# ----------------------------------------------------------------------------- 1 MB guard
def test_one_megabyte_unterminated_call_completes():
    text = f"{CHANNEL}commentary to=functions.f{MESSAGE}{{\"a\": \"" + "x<|" * 350_000
    long_unterminated_guard(HarmonyParser, text, content=None)  # the header is framing


# ----------------------------------------------------------------------------- corpus
# Records skipped, with the reason (record index in gpt_oss_harmony.jsonl -> reason).
CORPUS_SKIPS = {
    3: "llama.cpp reasoning_format NONE: analysis left in content with its markers (a client option, not the format)",
    16: "continue_final_message: the reasoning and the start of the answer are in the prompt, not in the text",
    17: "continue_final_message: the reasoning is partly in the prompt",
    29: "same text as record 23; llama.cpp's test context (no tools / tool_choice) drops the call, the format does not",
    30: "llama.cpp reasoning_format NONE (as 3)",
    31: "llama.cpp reasoning_format NONE (as 3)",
    37: "token-id dump (o200k_harmony ids), not text; no tokenizer here",
}
CORPUS_CHECKED = 20


def test_corpus_gpt_oss_harmony():
    check_corpus_records(
        HarmonyParser, "gpt_oss_harmony.jsonl", CORPUS_CHECKED, skip=CORPUS_SKIPS, reasoning_open_rule=prompt_opened(None), property_on_all=True
    )


HARMONY_DATA_EXPECT = {
    # rendered conversations (prompt + model messages): model messages kept, others dropped
    "test_does_not_drop_if_ongoing_analysis.txt": (
        "",
        (ToolCall("lookup_weather", '{"location": "San Francisco"}'),),
        "User asks: \u201cWhat is the weather in SF?\u201d We need to use lookup_weather tool.",
    ),
    "test_keep_analysis_between_finals.txt": ("48", (), "thinking 3+5"),
    "test_dropping_cot_by_default.txt": ("2 + 2 equals 4.", (), ""),
    "test_preserve_cot.txt": ("2 + 2 equals 4.", (), 'User asks a simple question: "What is 2 + 2?" The answer: 4.'),
    "test_streamable_parser.txt": ("", (), None),
    "test_tool_response_parsing.txt": ("", (), ""),
}


def test_harmony_test_data_files():
    """openai/harmony test-data: the text files parse (system/developer prompts give no calls, no
    content); conversations give their assistant messages; token-id dumps are skipped (no
    o200k_harmony tokenizer here)."""
    folder = OUTPUTS / "harmony_test_data"
    if not folder.exists():
        pytest.skip("harmony_test_data absent")
    seen = 0
    for path in sorted(folder.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        if re.fullmatch(r"[\d\s]+", text):
            continue  # token ids
        got = HarmonyParser().parse(text)
        assert check_stream_equals_whole(HarmonyParser, text, ["whole", "char", "fixed-5", "fixed-13"]) == [], path.name
        if path.name in HARMONY_DATA_EXPECT:
            content, calls, reasoning = HARMONY_DATA_EXPECT[path.name]
            assert got.content == content and got.calls == calls, path.name
            if reasoning is not None:
                assert got.reasoning == reasoning, path.name
        else:
            assert got.calls == () and got.content == "", path.name  # prompts only
        seen += 1
    assert seen == 21  # 23 files, 2 token-id dumps


# ----------------------------------------------------------------------------- public bugs
def test_public_bug_cases():
    check_public_bug_cases(HarmonyParser, ("harmony",))
