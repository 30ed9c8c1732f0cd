"""Granite 3.x (``<|tool_call|>`` + a JSON list of calls) and Granite 4 (``<tool_call>`` JSON
``</tool_call>`` blocks): two registered families in one module."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from families.spec import Corpus, Example, Family, Feed, Long, Property, Syntax, call
from replay.parsers.base import CallDelta, ParseResult
from replay.parsers.granite import TOOL_CALL, TOOL_CALL_PLAIN, Granite4Parser, GraniteParser
from strategies import DUMP_STYLES, json_objects, names, text_with, with_reasoning, ws

G_MARKERS = [TOOL_CALL, TOOL_CALL_PLAIN, "<think>", "</think>", "<response>", "</response>", "<|tool", "_call|>", "[", "]"]
G4_MARKERS = ["<tool_call>", "</tool_call>", "<tool_", "</tool", "tool_call>", "<think>", "</think>"]


@st.composite
def granite3_block(draw):
    items = []
    for _ in range(draw(st.integers(1, 3))):
        item = {"name": draw(names), "arguments": draw(json_objects(G_MARKERS))}
        if draw(st.integers(0, 3)) == 0:
            item["id"] = "123456789"
        items.append(item)
    body = json.dumps(items, **draw(st.sampled_from(DUMP_STYLES)))
    marker = draw(st.sampled_from([TOOL_CALL, TOOL_CALL, TOOL_CALL_PLAIN]))
    return f"{marker}{draw(ws)}{body}{draw(ws)}"


g3_malformed = st.one_of(
    st.builds(lambda t: TOOL_CALL + t, text_with(G_MARKERS)),
    st.sampled_from(
        [
            f'{TOOL_CALL}{{"name": "f", "arguments": {{}}}}',
            f"{TOOL_CALL}[]",
            f'{TOOL_CALL}[{{"name": "f"}}]',
            f'{TOOL_CALL}[{{"name": "f", "arguments": "{{}}"}}]',
            f'{TOOL_CALL}[{{"name": "f", "arguments": {{}}}}] tail',
            f'{TOOL_CALL_PLAIN}{{"name": "f", "arguments": {{}}}}</tool_call>',
            f"{TOOL_CALL}[1.",
            f"{TOOL_CALL}  ",
            f'{TOOL_CALL}["{TOOL_CALL}"',
        ]
    ),
)


@st.composite
def granite3_body(draw):
    parts = [draw(st.one_of(st.just(""), st.just(""), text_with(G_MARKERS)))]
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        parts.append(draw(st.one_of(granite3_block(), granite3_block(), granite3_block(), g3_malformed)))
        parts.append(draw(st.sampled_from(["", "", "", "\n", " x "])))
    body = "".join(parts)
    wrap = draw(st.sampled_from(["none", "none", "response", "response-open"]))
    if wrap == "response":
        body = f"<response>{body}</response>{draw(st.sampled_from(['', chr(10), ' tail']))}"
    elif wrap == "response-open":
        body = f"<response>{body}"
    return body


@st.composite
def granite3_outputs(draw):
    text, ro = draw(with_reasoning(granite3_body(), G_MARKERS))
    if draw(st.integers(0, 5)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text, ro


@st.composite
def granite4_call(draw):
    obj = {"name": draw(names), "arguments": draw(json_objects(G4_MARKERS))}
    return f"<tool_call>{draw(ws)}{json.dumps(obj, **draw(st.sampled_from(DUMP_STYLES)))}{draw(ws)}</tool_call>"


@st.composite
def granite4_body(draw):
    parts = [draw(text_with(G4_MARKERS))]
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        parts.append(draw(st.one_of(
            granite4_call(), granite4_call(),
            st.builds(lambda t: f"<tool_call>{t}</tool_call>", text_with(G4_MARKERS)),
            st.just('<tool_call>{"name": "f", "arguments": {}} junk</tool_call>'),
        )))
        parts.append(draw(st.one_of(st.just(""), st.just("\n"), text_with(G4_MARKERS))))
    text = "".join(parts)
    if draw(st.integers(0, 3)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


ARRAY = '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}, {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}]'
A, B = call("get_weather", '{"city": "Paris", "days": 3}'), call("get_time", '{"tz": "Europe/Paris"}')
ONE = '[{"name": "f", "arguments": {"a": 1}}]'
G3_NEXT = (TOOL_CALL + ONE[:-3], ONE[-3:] + "\n" + TOOL_CALL + "[", ONE[1:])
CUT = TOOL_CALL + ARRAY[:-5]
TAIL = TOOL_CALL + ARRAY + " and then"
NOW = call("now", "{}")
SKIPPED = {
    2: "no expected values (llama.cpp test without an assertion on the result)",
    3: "continue_final_message: the expected message includes the prefilled text",
    4: "continue_final_message: the expected reasoning includes the prefilled text",
    8: "reasoning_format none: llama.cpp leaves <think> in content; the parser always splits it",
    11: "reasoning_format none: llama.cpp leaves <think>/<response> in content",
    22: "llama.cpp generic JSON fallback ({\"tool_calls\": [...]}), not Granite syntax",
}

GRANITE3 = Family(
    cls=GraniteParser,
    syntax=(Syntax(f'{TOOL_CALL}[{{"name": "f", "arguments": {{"a": ', "}}]", f'{TOOL_CALL}[{{"name": "g", "arguments": {{}}}}]'),),
    properties=(Property("outputs", granite3_outputs(), base=100),),
    examples=(
        Example(
            "array-two-calls-in-one-delta", TOOL_CALL + ARRAY, ParseResult("", (A, B)),
            # complete, but text after the array would make it content: only the end of the stream decides it
            deltas=(TOOL_CALL + ARRAY,), events=(Feed(), Feed(calls=(CallDelta(0, "get_weather", A.arguments), CallDelta(1, "get_time", B.arguments)))),
        ),
        Example(
            "marker-split-across-deltas", "Sure " + TOOL_CALL + ARRAY, deltas=("Sure <|tool", "_call|>" + ARRAY[:10], ARRAY[10:]),
            events=(Feed("Sure "), Feed(), Feed(), Feed(calls=(CallDelta(0, "get_weather", A.arguments), CallDelta(1, "get_time", B.arguments)))),
        ),
        Example(
            "block-end-and-next-start-in-one-delta", "".join(G3_NEXT), ParseResult("", (call("f", '{"a": 1}'), call("f", '{"a": 1}'))), deltas=G3_NEXT,
            events=(None, Feed(calls=(CallDelta(0, "f", '{"a": 1}'),)), None, Feed(calls=(CallDelta(1, "f", '{"a": 1}'),))),
        ),
        Example("plain-tool-call-marker-and-zero-args", '<tool_call>[{"name": "now", "arguments": {}}]\n', ParseResult("", (NOW,))),
        Example("cut-off-is-content", CUT, ParseResult(CUT, ())),
        Example("text-after-the-array-is-content", TAIL, ParseResult(TAIL, ())),
        Example("missing-arguments-is-no-call", TOOL_CALL + '[{"name": "f"}]', ParseResult(TOOL_CALL + '[{"name": "f"}]', ())),  # vLLM requires "arguments"
        Example("reasoning-and-response-wrapper", "<think>I'm\nthinking</think><response>Hello, world!\nWhat's up?</response>", ParseResult("Hello, world!\nWhat's up?", (), "I'm\nthinking")),
        Example("reasoning-response-and-calls", "<think>plan</think>\n<response>" + TOOL_CALL + ARRAY + "</response>", ParseResult("", (A, B), "plan")),
        Example("reasoning-open", "plan</think>" + TOOL_CALL + ARRAY, ParseResult("", (A, B), "plan"), reasoning_open=True),
        Example(
            "tools-do-not-retype-json-arguments", TOOL_CALL + '[{"name": "f", "arguments": {"n": "1"}}]', ParseResult("", (call("f", '{"n": "1"}'),)),
            tools=[{"type": "function", "function": {"name": "f", "parameters": {"properties": {"n": {"type": "integer"}}}}}],
        ),
    ),
    planted=TOOL_CALL + ARRAY + "\n" + TOOL_CALL + ONE,  # the first block is decided at the second marker, in a feed
    finish=TOOL_CALL + ARRAY,
    finish_calls=True,
    long=(
        Long("g3-string", TOOL_CALL + '[{"name": "f", "arguments": {"a": "' + "x" * 1_000_000),
        Long("g3-nesting", TOOL_CALL + "[" + "[" * 1_000_000),
    ),
    corpus=(Corpus("granite.jsonl", 7, dict(skip=SKIPPED), with_calls=1),),
    public_bugs=("granite",),
)

G4_A = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>'
G4_B = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}\n</tool_call>'
G4_CUT = '<tool_call>{"name": "f", "arguments": {"a": '

GRANITE4 = Family(
    cls=Granite4Parser,
    syntax=(Syntax('<tool_call>{"name": "f", "arguments": {"a": ', "}}</tool_call>", '<tool_call>{"name": "g", "arguments": {}}</tool_call>'),),
    properties=(Property("outputs", with_reasoning(granite4_body(), G4_MARKERS), base=100),),
    examples=(
        Example("calls-and-content", "Let me check.\n" + G4_A + "\n" + G4_B, ParseResult("Let me check.\n\n", (A, B))),
        Example("call-end-and-next-start-in-one-delta", G4_A + G4_B, ParseResult("", (A, B)), deltas=(G4_A[:-5], G4_A[-5:] + G4_B[:14], G4_B[14:])),
        Example(
            "unterminated-zero-arg-call-reported-by-finish", '<tool_call>{"name": "now", "arguments": {}}',
            deltas=('<tool_call>{"name": "now", "arguments": {}}',), events=(Feed(), Feed(calls=(CallDelta(0, "now", "{}"),))),
        ),
        Example("cut-off-is-content", G4_CUT, ParseResult(G4_CUT, ())),
    ),
    planted=G4_A + "\n" + G4_B,
    finish=G4_A + '\n<tool_call>{"name": "g", "arguments": {"n": 1}}',
    finish_calls=True,
    long=(Long("g4-string", '<tool_call>{"name": "f", "arguments": {"a": "' + "x" * 1_000_000),),
    public_bugs=("granite4",),
)

FAMILY = (GRANITE3, GRANITE4)
