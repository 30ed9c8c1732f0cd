"""GLM-4.5 / 4.6 / 4.7 / GLM-5 tool calls: ``<tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>``
(4.5/4.6 with newlines between the parts, 4.7 without)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from families.spec import Corpus, Example, Family, Feed, Long, Property, Syntax, call
from replay.parsers.base import CallDelta, ParseResult
from replay.parsers.glm45 import END, KEY_CLOSE, KEY_OPEN, START, VAL_CLOSE, VAL_OPEN
from replay.parsers.glm45 import Glm45Parser as P
from strategies import json_values, names, plain_chars, text_with

GLM_MARKERS = [START, END, KEY_OPEN, KEY_CLOSE, VAL_OPEN, VAL_CLOSE, "<think>", "</think>", "<tool_", "</arg", "\\n"]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "s": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array"}}}}}]


def _value_text(value):
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@st.composite
def glm_call(draw):
    newline = draw(st.booleans())  # 4.5/4.6 layout, else 4.7
    sep = draw(st.sampled_from(["\n", "\n", "\\n", " \n"])) if newline else ""
    name = draw(st.one_of(names.filter(lambda n: "<" not in n), st.sampled_from(["f", "get_weather"])))
    parts = [START, name, sep]
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(["s", "n", "x", "b", "o", "a", "city", ""]) | st.text(plain_chars, max_size=4))
        key = key.replace("<", "")
        value = draw(json_values(GLM_MARKERS))
        parts += [KEY_OPEN, key, KEY_CLOSE, sep, VAL_OPEN, _value_text(value).replace(VAL_CLOSE, ""), VAL_CLOSE, sep]
    parts.append(END)
    return "".join(parts)


glm_malformed = st.one_of(
    st.builds(lambda t: f"{START}{t}{END}", text_with(GLM_MARKERS)),
    st.builds(lambda t: f"{START}f{KEY_OPEN}k{KEY_CLOSE}{t}{END}", text_with(GLM_MARKERS)),
    st.sampled_from(
        [
            f"{START}{END}",
            f"{START}  \n{KEY_OPEN}a{KEY_CLOSE}{VAL_OPEN}1{VAL_CLOSE}{END}",
            f"{START}f{KEY_OPEN}a{KEY_CLOSE}junk{VAL_OPEN}1{VAL_CLOSE}{END}",
            f"{START}f{KEY_OPEN}a{VAL_OPEN}1{VAL_CLOSE}{END}",
            f"{START}f{VAL_OPEN}1{VAL_CLOSE}{END}",
            f"{START}f{KEY_OPEN}a{KEY_CLOSE}{VAL_OPEN}1{VAL_CLOSE}x{END}",
            f"{START}f{START}g{END}",
            f"{START}f{KEY_OPEN}a{KEY_CLOSE}{VAL_OPEN}1",
            f"{START}f\\",
        ]
    ),
)


@st.composite
def glm_outputs(draw):
    parts = []
    if draw(st.integers(0, 3)) == 0:
        lead, gap = draw(st.sampled_from(["", " ", "\n"])), draw(st.sampled_from(["", "\n\n"]))
        parts.append(lead + "<think>" + draw(text_with(GLM_MARKERS)) + "</think>" + gap)
    parts.append(draw(text_with(GLM_MARKERS)))
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        parts.append(draw(st.one_of(glm_call(), glm_call(), glm_malformed)))
        parts.append(draw(st.one_of(st.just(""), st.just("\n"), text_with(GLM_MARKERS))))
    text = "".join(parts)
    if draw(st.integers(0, 3)) == 0 and text:
        text = text[: draw(st.integers(0, len(text)))]
    return text


G46_A = f"{START}get_weather\n{KEY_OPEN}city{KEY_CLOSE}\n{VAL_OPEN}Paris{VAL_CLOSE}\n{KEY_OPEN}days{KEY_CLOSE}\n{VAL_OPEN}3{VAL_CLOSE}\n{END}"
G47_B = f"{START}get_time{KEY_OPEN}tz{KEY_CLOSE}{VAL_OPEN}Europe/Paris{VAL_CLOSE}{END}"
A, B = call("get_weather", '{"city": "Paris", "days": 3}'), call("get_time", '{"tz": "Europe/Paris"}')
SPLIT = ("Hi <tool", "_call>f<arg_k", "ey>a</arg_key><arg_value>1</arg_value></tool", "_call> bye <tool_")
AB = G46_A + G47_B
_I = AB.index(END)
_J = len(G46_A) + len(START) + 4
TYPED = f"{START}f{KEY_OPEN}s{KEY_CLOSE}{VAL_OPEN}1{VAL_CLOSE}{KEY_OPEN}n{KEY_CLOSE}{VAL_OPEN}1{VAL_CLOSE}{KEY_OPEN}u{KEY_CLOSE}{VAL_OPEN}true{VAL_CLOSE}{END}"
THINK_TEXT = "<think>plan</think>\n\nOK." + G47_B
OPENED = "plan</think>" + G47_B
UNCLOSED = "<think>still " + G47_B  # never closed: all reasoning, no call
BAD = f"{START}f{KEY_OPEN}a{KEY_CLOSE}oops{VAL_OPEN}1{VAL_CLOSE}{END}"
CUTS = (f"a{START}f{KEY_OPEN}x{KEY_CLOSE}{VAL_OPEN}1{VAL_CLOSE}", f"a{START}f", f"a{START}f{KEY_OPEN}x{KEY_CLOSE}{VAL_OPEN}12")
SKIPPED = {
    7: "continue_final_message: the text continues a prefilled assistant message ('Hello, ' and the reasoning are in the prompt)",
    8: "continue_final_message: the reasoning's first words are in the prompt, not in the text",
}

FAMILY = Family(
    cls=P,
    syntax=(Syntax("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>", "</arg_value>\n</tool_call>", "<tool_call>g</tool_call>", ""),),
    properties=(
        Property("outputs", glm_outputs(), base=100),
        Property("outputs-typed", glm_outputs(), base=20, tools=TOOLS),
        Property("outputs-typed-open", glm_outputs(), base=20, tools=TOOLS, reasoning_open=True),
    ),
    examples=(
        Example(
            "two-calls-in-one-delta-both-layouts", "Checking.\n" + G46_A + "\n" + G47_B, ParseResult("Checking.\n\n", (A, B)),
            streamed=((0, *A.__dict__.values()), (1, *B.__dict__.values())),
        ),
        Example(
            "marker-split-across-deltas", "".join(SPLIT), deltas=SPLIT,
            events=(Feed("Hi "), Feed(), Feed(), Feed(" bye ", (CallDelta(0, "f", '{"a": 1}'),)), Feed("<tool_")),
        ),
        Example(
            "call-end-and-next-start-in-one-delta", AB, ParseResult("", (A, B)), deltas=(AB[:_I], AB[_I:_J], AB[_J:]),
            events=(None, Feed(calls=(CallDelta(0, *A.__dict__.values()),)), Feed(calls=(CallDelta(1, *B.__dict__.values()),)), Feed()),
        ),
        Example(
            "call-completed-in-last-delta-finish-sends-no-call", G47_B, deltas=(G47_B[:-3], G47_B[-3:]),
            events=(Feed(), Feed(calls=(CallDelta(0, "get_time", '{"tz": "Europe/Paris"}'),)), Feed()),
        ),
        *(Example(f"cut-off-call-is-content-{k}", t, ParseResult(t), deltas=(t,), events=(Feed("a"), Feed(t[1:]))) for k, t in enumerate(CUTS)),
        *(Example(f"zero-arg-call-{k}", t, ParseResult("", (call("now", "{}"),))) for k, t in enumerate((f"{START}now{END}", f"{START}now\n{END}", f"{START}now\\n{END}"))),
        Example("typing-declared", TYPED, ParseResult("", (call("f", '{"s": "1", "n": 1, "u": true}'),)), tools=TOOLS),
        Example("typing-undeclared", TYPED, ParseResult("", (call("f", '{"s": 1, "n": 1, "u": true}'),))),
        Example("typing-keeps-value-spaces", f"{START}f{KEY_OPEN} s {KEY_CLOSE}{VAL_OPEN} a b {VAL_CLOSE}{END}", ParseResult("", (call("f", '{"s": " a b "}'),)), tools=TOOLS),
        Example("reasoning-split", THINK_TEXT, ParseResult("OK.", (B,), "plan"), deltas=("<thi", "nk>pl", "an</th", "ink>\n", "\nOK.", G47_B)),
        Example("reasoning-opened-by-prompt", OPENED, ParseResult("", (B,), "plan"), reasoning_open=True),
        Example("reasoning-end-without-open-is-content", OPENED, ParseResult("plan</think>", (B,))),
        Example("reasoning-never-closed", UNCLOSED, ParseResult("", (), "still " + G47_B)),
        *(Example(f"reasoning-open-property-{k}", t, reasoning_open=True) for k, t in enumerate((THINK_TEXT, UNCLOSED))),
        Example("malformed-block-is-content", BAD + G47_B, ParseResult(BAD, (B,))),
        Example("nested-start-is-content", f"{START}f oops " + G47_B, ParseResult(f"{START}f oops ", (B,))),
        Example("end-marker-inside-value", f"{START}f{KEY_OPEN}code{KEY_CLOSE}{VAL_OPEN}x{END}y{VAL_CLOSE}{END}", ParseResult("", (call("f", '{"code": "x</tool_call>y"}'),))),
        Example("empty-block", f"{START}{END}x"),
    ),
    planted="Let me check.\n" + G46_A + "\n" + G47_B,
    finish=G46_A + f"\n{START}g{KEY_OPEN}n{KEY_CLOSE}{VAL_OPEN}1",
    long=(
        Long("value", f"{START}f{KEY_OPEN}a{KEY_CLOSE}{VAL_OPEN}" + "x<" * 500_000),
        Long("tag-prefixes", f"{START}f" + "<arg_" * 200_000),
        Long("separators", f"{START}f{KEY_OPEN}a{KEY_CLOSE}{VAL_OPEN}1{VAL_CLOSE}" + " \\" * 500_000),
    ),
    corpus=(Corpus("glm45.jsonl", 7, dict(skip=SKIPPED), with_calls=5),),
    public_bugs=("glm45",),
)
