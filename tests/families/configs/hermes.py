"""Hermes / Qwen2.5 / Qwen3 / QwQ tool calls: ``<tool_call>`` + a JSON object + ``</tool_call>``."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from families.planted import plant
from families.spec import Example, Family, Feed, Property, Syntax, call
from hypo import budget
from replay.parsers import HermesParser as P
from replay.parsers.base import CallDelta, ParseResult
from replay.stream import check_stream_equals_whole
from strategies import DUMP_STYLES, json_objects, names, text_with, with_reasoning, ws

HERMES_MARKERS = ["<tool_call>", "</tool_call>", "<tool_", "</tool", "tool_call>"]


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


H_CALL_A = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>'
H_CALL_B = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}\n</tool_call>'
A, B = call("get_weather", '{"city": "Paris", "days": 3}'), call("get_time", '{"tz": "Europe/Paris"}')
AB = H_CALL_A + H_CALL_B
_C = H_CALL_A.index("}}") + 2
AT_FINISH = '<tool_call>\n{"name": "f", "arguments": {"n": 12}}'
SPLIT = ("Hi <tool", '_call>{"name": "f", "arguments": {}}</tool', "_call> bye <tool_")
BAD = '<tool_call>{"name": "f", "arguments": {"a": 1,}}</tool_call>'
GOOD = '<tool_call>{"name": "g", "arguments": {"b": [true, null]}}</tool_call>'
VERBATIM = "  <think>\nhm <tool_call>\n</think>\n\n" + H_CALL_A + "\n after <think>x</think> "


@budget(40)
@given(st.lists(hermes_call(), min_size=1, max_size=3).map("\n".join))
def raw_args_caught_on_generated_outputs(text):
    """Bug (a) always shows on generated calls: the join is raw text + dumped text, never the dumped text alone."""
    assert check_stream_equals_whole(plant("raw-args-first", P), text, ["whole", "char"])


FAMILY = Family(
    cls=P,
    syntax=(Syntax('<tool_call>{"name": "f", "arguments": {"a": ', "}}</tool_call>", '<tool_call>{"name": "g", "arguments": {}}</tool_call>'),),
    properties=(Property("outputs", with_reasoning(hermes_outputs(), HERMES_MARKERS), base=120),),
    examples=(
        Example("two-calls-in-one-delta", "Checking.\n" + H_CALL_A + "\n" + H_CALL_B, ParseResult("Checking.\n\n", (A, B)), streamed=((0, *A.__dict__.values()), (1, *B.__dict__.values()))),
        Example("call-end-and-next-start-in-one-delta", AB, ParseResult("", (A, B)), deltas=(AB[:_C], AB[_C : len(H_CALL_A) + 14], AB[len(H_CALL_A) + 14 :])),
        Example(
            "call-reported-by-finish", AT_FINISH, ParseResult("", (call("f", '{"n": 12}'),)),
            deltas=(AT_FINISH,), events=(Feed(), Feed(calls=(CallDelta(0, "f", '{"n": 12}'),))),  # the number could go on, and an end marker may follow
        ),
        Example("zero-arg-call", '<tool_call>\n{"name": "current_time", "arguments": {}}\n</tool_call>', ParseResult("", (call("current_time", "{}"),))),
        Example(
            "parameters-synonym-and-marker-in-string", '<tool_call>{"name": "w", "parameters": {"s": "a</tool_call>b"}}</tool_call>tail',
            ParseResult("tail", (call("w", '{"s": "a</tool_call>b"}'),)),
        ),
        Example("unterminated-valid-call-is-a-call", '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n', ParseResult("", (call("f", '{"a": 1}'),))),
        Example("unterminated-truncated-call-is-content", 'x<tool_call>\n{"name": "f", "arguments": {"a": ', ParseResult('x<tool_call>\n{"name": "f", "arguments": {"a": ', ())),
        Example(
            "marker-split-across-deltas", "".join(SPLIT), deltas=SPLIT,
            events=(Feed("Hi "), None, Feed(" bye ", (CallDelta(0, "f", "{}"),)), Feed("<tool_")),  # "<tool" held back
        ),
        Example("malformed-json-is-content", BAD + "\n" + GOOD, ParseResult(BAD + "\n", (call("g", '{"b": [true, null]}'),))),
        Example("junk-after-the-json-is-content", '<tool_call>{"name": "f", "arguments": {}} x</tool_call>'),
        Example("marker-then-prose", "<tool_call>oops", ParseResult("<tool_call>oops", ())),
        # the leading reasoning (with the <tool_call> it mentions) is split off, with the whitespace after </think>; a later <think> is content
        Example("content-verbatim-reasoning-split-off", VERBATIM, ParseResult("\n after <think>x</think> ", (A,), "\nhm <tool_call>\n")),
        Example("reasoning-open", "plan\n</think>\n" + H_CALL_A, ParseResult("", (A,), "plan\n"), reasoning_open=True),
    ),
    planted="Let me check.\n" + H_CALL_A + "\n" + H_CALL_B,
    finish=H_CALL_A + '\n<tool_call>\n{"name": "g", "arguments": {"n": 1}}',
    finish_calls=True,
    extra=(raw_args_caught_on_generated_outputs,),
)
