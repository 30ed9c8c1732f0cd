"""gpt-oss Harmony: messages ``<|start|>HEADER<|message|>BODY<|end|>``; a call is a message to
``functions.NAME`` (``<|call|>``-terminated), reasoning the ``analysis`` channel."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import strategies as st

from families.spec import Corpus, Example, Family, Feed, Long, Property, Syntax, call
from replay.parsers.base import CallDelta, ParseResult
from replay.parsers.harmony import CALL, CHANNEL, CONSTRAIN, END, MESSAGE, RETURN, START
from replay.parsers.harmony import HarmonyParser as P
from replay.stream import check_stream_equals_whole
from strategies import DUMP_STYLES, OUTPUTS, json_objects, prompt_opened, text_with, ws

H_MARKERS = [START, END, MESSAGE, CHANNEL, CONSTRAIN, RETURN, CALL, "<|", "<|cha", "|>", " to=functions.x"]
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
        parts.append(draw(st.one_of(call_message(), call_message(), other_message(), malformed, text_with(H_MARKERS))))
    text = "".join(parts)
    if draw(st.booleans()) and draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


CALL_A = f"{START}assistant{CHANNEL}commentary to=functions.get_weather {CONSTRAIN}json{MESSAGE}{{\"city\":\"Paris\",\"days\":3}}{CALL}"
CALL_B = f"{START}assistant to=functions.get_time{CHANNEL}commentary{CONSTRAIN}json{MESSAGE}{{\"tz\": \"Europe/Paris\"}}{CALL}"
THINK = f"{CHANNEL}analysis{MESSAGE}Need weather and time.{END}"
TWO = THINK + CALL_A + CALL_B
A, B = call("get_weather", '{"city": "Paris", "days": 3}'), call("get_time", '{"tz": "Europe/Paris"}')
_M = (THINK + CALL_A).index(MESSAGE, len(THINK))
K = len(CALL_A)
AT_FINISH = f"{CHANNEL}commentary to=functions.f {CONSTRAIN}json{MESSAGE}{{\"n\": 12}}"
CONT = f"still thinking{END}{START}assistant{CHANNEL}final{MESSAGE}Hi!"
PREAMBLE = (
    f"{CHANNEL}commentary{MESSAGE}Let me look.{END}"
    f"{START}assistant{CHANNEL}analysis to=browser.search code{MESSAGE}{{\"q\": 1}}{CALL}"
    f"{START}browser.search to=assistant{CHANNEL}commentary{MESSAGE}{{\"r\": 2}}{END}"
    f"{START}assistant{CHANNEL}commentary to=assistant{CHANNEL}final{MESSAGE}Done."
)

CORPUS_SKIPS = {
    3: "llama.cpp reasoning_format NONE: analysis left in content with its markers (a client option, not the format)",
    16: "continue_final_message: the reasoning and the start of the answer are in the prompt, not in the text",
    17: "continue_final_message: the reasoning is partly in the prompt",
    29: "same text as record 23; llama.cpp's test context (no tools / tool_choice) drops the call, the format does not",
    30: "llama.cpp reasoning_format NONE (as 3)",
    31: "llama.cpp reasoning_format NONE (as 3)",
    37: "token-id dump (o200k_harmony ids), not text; no tokenizer here",
}

HARMONY_DATA_EXPECT = {
    # rendered conversations (prompt + model messages): model messages kept, others dropped
    "test_does_not_drop_if_ongoing_analysis.txt": (
        "",
        (call("lookup_weather", '{"location": "San Francisco"}'),),
        "User asks: \u201cWhat is the weather in SF?\u201d We need to use lookup_weather tool.",
    ),
    "test_keep_analysis_between_finals.txt": ("48", (), "thinking 3+5"),
    "test_dropping_cot_by_default.txt": ("2 + 2 equals 4.", (), ""),
    "test_preserve_cot.txt": ("2 + 2 equals 4.", (), 'User asks a simple question: "What is 2 + 2?" The answer: 4.'),
    "test_streamable_parser.txt": ("", (), None),
    "test_tool_response_parsing.txt": ("", (), ""),
}


def harmony_test_data_files():
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
        got = P().parse(text)
        assert check_stream_equals_whole(P, text, ["whole", "char", "fixed-5", "fixed-13"]) == [], path.name
        if path.name in HARMONY_DATA_EXPECT:
            content, calls, reasoning = HARMONY_DATA_EXPECT[path.name]
            assert got.content == content and got.calls == calls, path.name
            if reasoning is not None:
                assert got.reasoning == reasoning, path.name
        else:
            assert got.calls == () and got.content == "", path.name  # prompts only
        seen += 1
    assert seen == 21  # 23 files, 2 token-id dumps


_HARMONY = f"<|start|>assistant<|channel|>commentary to=functions.{{}} {CONSTRAIN}json{MESSAGE}"

FAMILY = Family(
    cls=P,
    syntax=(Syntax(_HARMONY.format("f") + '{"a": ', "}" + CALL, _HARMONY.format("g") + "{}" + CALL),),
    properties=(Property("outputs", harmony_outputs(), base=70), Property("open", harmony_outputs(), base=30, reasoning_open=True)),
    examples=(
        Example("two-calls-and-reasoning-in-one-delta", TWO, ParseResult("", (A, B), "Need weather and time."), streamed=((0, *A.__dict__.values()), (1, *B.__dict__.values()))),
        Example(
            "marker-split-across-deltas", THINK + CALL_A, deltas=((THINK + CALL_A)[: _M + 4], (THINK + CALL_A)[_M + 4 :]),  # "<|me" | "ssage|>{...}"
            events=(Feed(reasoning="Need weather and time."), Feed(calls=(CallDelta(0, "get_weather", A.arguments),)), Feed()),
        ),
        Example("call-end-and-next-start-in-one-delta", CALL_A + CALL_B, ParseResult("", (A, B)), deltas=((CALL_A + CALL_B)[: K - 3], (CALL_A + CALL_B)[K - 3 : K + 20], (CALL_A + CALL_B)[K + 20 :])),
        Example(
            # the documented exception (README content rules): <|call|> is a stop token servers strip
            "call-without-call-token-completed-at-finish", AT_FINISH, ParseResult("", (call("f", '{"n": 12}'),)),
            deltas=(AT_FINISH,), events=(Feed(), Feed(calls=(CallDelta(0, "f", '{"n": 12}'),))),  # no terminator yet: the message may go on
        ),
        Example("call-cut-off-is-content", f"{CHANNEL}commentary to=functions.f{MESSAGE}{{\"n\": 1", ParseResult('{"n": 1', ())),
        *(Example(f"zero-arg-call-{k}", f"{CHANNEL}commentary to=functions.now{MESSAGE}{body}{CALL}", ParseResult("", (call("now", "{}"),))) for k, body in enumerate(("{}", "", " \n"))),
        Example("empty-body-without-call-token-is-no-call", f"{CHANNEL}commentary to=functions.now{MESSAGE}", ParseResult("", ())),
        Example("reasoning-split", f"{CHANNEL}analysis{MESSAGE}hmm{END}{START}assistant{CHANNEL}final{MESSAGE}Hi!{RETURN}", ParseResult("Hi!", (), "hmm")),
        Example("reasoning-open", CONT, ParseResult("Hi!", (), "still thinking"), reasoning_open=True),
        Example("preamble-builtin-tools-and-foreign-roles", PREAMBLE, ParseResult("Let me look.Done.", ())),
        Example("plain-text-without-markers-is-content", "just text <| not a marker", ParseResult("just text <| not a marker", ())),
        Example("partial-marker-at-the-end", "just text <|", ParseResult("just text <|", ())),
    ),
    planted=TWO,
    finish=THINK + CALL_A + f"{START}assistant{CHANNEL}commentary to=functions.g{MESSAGE}{{\"n\": 1}}",
    finish_calls=True,
    long=(Long("string", f"{CHANNEL}commentary to=functions.f{MESSAGE}{{\"a\": \"" + "x<|" * 350_000, None),),  # the header is framing
    corpus=(Corpus("gpt_oss_harmony.jsonl", 20, dict(skip=CORPUS_SKIPS, reasoning_open_rule=prompt_opened(None), property_on_all=True)),),
    public_bugs=("harmony",),
    extra=(harmony_test_data_files,),
)
