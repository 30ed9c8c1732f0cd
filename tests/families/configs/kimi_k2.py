"""Kimi K2 (Instruct, Thinking) tool calls: ``<|tool_call_begin|>functions.NAME:IDX
<|tool_call_argument_begin|>{JSON}<|tool_call_end|>`` in a ``<|tool_calls_section_begin|>`` section."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from families.spec import Corpus, Example, Family, Feed, Long, Property, Syntax, call
from replay.parsers.base import CallDelta, ParseResult
from replay.parsers.kimi_k2 import (
    ARG_BEGIN,
    CALL_BEGIN,
    CALL_END,
    SECTION_BEGIN,
    SECTION_BEGIN_SINGULAR,
    SECTION_END,
    SECTION_END_SINGULAR,
)
from replay.parsers.kimi_k2 import KimiK2Parser as P
from strategies import DUMP_STYLES, json_objects, text_with, with_reasoning, ws

MARKS = [SECTION_BEGIN, SECTION_BEGIN_SINGULAR, SECTION_END, SECTION_END_SINGULAR, CALL_BEGIN, ARG_BEGIN, CALL_END, "<|tool_", "_end|>", "functions."]


@st.composite
def kimi_call(draw):
    args = json.dumps(draw(json_objects(MARKS)), **draw(st.sampled_from(DUMP_STYLES)))
    name = draw(st.sampled_from(["get_weather", "f", "a.b-c", "x:y", "数据"]))
    prefix = draw(st.sampled_from(["functions.", "functions.", ""]))
    idx = draw(st.integers(0, 12))
    return f"{CALL_BEGIN}{draw(ws)}{prefix}{name}:{idx}{draw(ws)}{ARG_BEGIN}{draw(ws)}{args}{draw(ws)}{CALL_END}"


kimi_malformed = st.one_of(
    st.builds(lambda t: f"{CALL_BEGIN}functions.f:0{ARG_BEGIN}{t}{CALL_END}", text_with(MARKS)),
    st.builds(lambda t: f"{CALL_BEGIN}{t}{ARG_BEGIN}{{}}{CALL_END}", text_with(MARKS)),
    st.sampled_from(
        [
            f"{CALL_BEGIN}functions.f{ARG_BEGIN}{{}}{CALL_END}",  # no :idx
            f"{CALL_BEGIN}functions.:0{ARG_BEGIN}{{}}{CALL_END}",  # empty name
            f"{CALL_BEGIN}functions.f:0{ARG_BEGIN}[1]{CALL_END}",
            f"{CALL_BEGIN}functions.f:0{ARG_BEGIN}{{}} x{CALL_END}",
            f"{CALL_BEGIN}functions.f:0{ARG_BEGIN}{{\"a\": 1}}{CALL_BEGIN}functions.g:1{ARG_BEGIN}{{}}",
            f"{CALL_BEGIN}functions.f:0{CALL_END}",
            f"{CALL_BEGIN}functions.f:0{ARG_BEGIN}{{\"a\": \"{SECTION_END}\"",
        ]
    ),
)


@st.composite
def kimi_bodies(draw):
    parts = [draw(text_with(MARKS))]
    n = draw(st.sampled_from([0, 1, 1, 2, 3]))
    if n:
        parts.append(draw(st.sampled_from([SECTION_BEGIN, SECTION_BEGIN, SECTION_BEGIN_SINGULAR, ""])))
        for _ in range(n):
            parts.append(draw(st.one_of(kimi_call(), kimi_call(), kimi_malformed)))
            parts.append(draw(st.sampled_from(["", "", "\n", " x "])))
            parts.append(draw(st.sampled_from(["", "", "\n", " x "])))
        parts.append(draw(st.sampled_from([SECTION_END, SECTION_END, SECTION_END_SINGULAR, ""])))
    parts.append(draw(st.one_of(st.just(""), text_with(MARKS))))
    text = "".join(parts)
    if draw(st.booleans()) and draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


A = f"{CALL_BEGIN}functions.get_weather:0{ARG_BEGIN}{{\"city\": \"Beijing\"}}{CALL_END}"
B = f"{CALL_BEGIN}functions.get_time:1{ARG_BEGIN}{{\"tz\":\"Asia/Shanghai\"}}{CALL_END}"
TWO = f"{SECTION_BEGIN}{A}{B}{SECTION_END}"
CA, CB = call("get_weather", '{"city": "Beijing"}'), call("get_time", '{"tz": "Asia/Shanghai"}')
_C = TWO.index(CALL_END)
_D = _C + len(CALL_END) + len(CALL_BEGIN) + 5
NO_END = f"{SECTION_BEGIN}{CALL_BEGIN}functions.now:0{ARG_BEGIN}{{}}"
BAD_ID = f"{CALL_BEGIN}functions.f{ARG_BEGIN}{{}}{CALL_END}"
IMPLICIT = "<think>plan" + SECTION_BEGIN + A

KIMI_SKIPPED = {
    11: "llama.cpp lenient reader: calls without <|tool_call_end|> followed by another <|tool_call_begin|>",
    12: "llama.cpp takes a last call whose <|tool_call_end|> never came; vLLM and SGLang (and replay) need the end marker",
}

FAMILY = Family(
    cls=P,
    syntax=(Syntax(f'{CALL_BEGIN}functions.f:0{ARG_BEGIN}{{"a": ', f"}}{CALL_END}", f"{CALL_BEGIN}functions.g:1{ARG_BEGIN}{{}}{CALL_END}"),),
    properties=(Property("bodies", with_reasoning(kimi_bodies(), MARKS), base=120),),
    examples=(
        Example(
            "two-calls-in-one-delta-section-dropped", "Sure." + TWO + "\n", ParseResult("Sure.\n", (CA, CB)),
            streamed=((0, *CA.__dict__.values()), (1, *CB.__dict__.values())),
        ),
        Example(
            "token-split-across-deltas", "Hi " + SECTION_BEGIN + A + SECTION_END,
            deltas=("Hi <|tool_calls_sec", "tion_begin|>" + A[:7], A[7:] + SECTION_END),
            events=(Feed("Hi "), Feed(), Feed(calls=(CallDelta(0, "get_weather", '{"city": "Beijing"}'),)), Feed()),
        ),
        Example("call-end-and-next-start-in-one-delta", TWO, ParseResult("", (CA, CB)), deltas=(TWO[:_C], TWO[_C:_D], TWO[_D:])),
        Example(
            "call-whose-end-marker-never-came-is-no-call", NO_END, ParseResult(NO_END, ()),  # vLLM/SGLang need <|tool_call_end|>
            deltas=(NO_END,), events=(Feed(), Feed(NO_END)),
        ),
        Example("call-cut-off-is-no-call", f"a{SECTION_BEGIN}{CALL_BEGIN}functions.f:0{ARG_BEGIN}{{\"x\": ",
                ParseResult(f"a{SECTION_BEGIN}{CALL_BEGIN}functions.f:0{ARG_BEGIN}{{\"x\": ", ())),
        Example(
            "zero-arg-call-and-name-kept-whole", f"{SECTION_BEGIN}{CALL_BEGIN} functions.ns.tool-x:3 {ARG_BEGIN}{{}}{CALL_END}{SECTION_END_SINGULAR}",
            ParseResult("", (call("ns.tool-x", "{}"),)),
        ),
        Example("malformed-id-is-content", SECTION_BEGIN + BAD_ID + A + SECTION_END, ParseResult(BAD_ID, (CA,))),
        Example("reasoning-split", "<think>plan</think>\n\nok" + TWO, ParseResult("ok", (CA, CB), "plan")),
        Example("reasoning-implicit-end", "<think>plan" + TWO, ParseResult("", (CA, CB), "plan")),
        Example(
            "reasoning-implicit-end-streamed", IMPLICIT, ParseResult("", (CA,), "plan"),
            deltas=("<think>pl", "an<|tool_calls_sec", "tion_begin|>" + A),
        ),
        Example("reasoning-open-implicit-end-singular", "plan" + SECTION_BEGIN_SINGULAR + A, ParseResult("", (CA,), "plan"), reasoning_open=True),
        Example("reasoning-never-closed", "<think>never closed " + A, ParseResult("", (), "never closed " + A)),
    ),
    planted=TWO,
    finish=f"{SECTION_BEGIN}{A}{CALL_BEGIN}functions.g:1{ARG_BEGIN}{{\"n\": 2}}",
    long=(Long("string", f"{SECTION_BEGIN}{CALL_BEGIN}functions.f:0{ARG_BEGIN}{{\"a\": \"" + "x<|" * 350_000),),
    corpus=(Corpus("kimi_k2.jsonl", 9, dict(skip=KIMI_SKIPPED, calls_only=True)),),
    public_bugs=("kimi_k2", "kimi-k2", "kimik2"),
)
