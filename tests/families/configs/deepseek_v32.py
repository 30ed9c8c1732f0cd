"""DeepSeek V3.2 / V4 DSML tool calls: ``<｜DSML｜function_calls>`` (V4: ``tool_calls``) blocks of
``<｜DSML｜invoke name="...">`` items with ``<｜DSML｜parameter name=".." string="true|false">``."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from families.spec import Corpus, Example, Family, Feed, Long, Property, Syntax, call
from replay.parsers.base import CallDelta, ParseResult
from replay.parsers.deepseek_v32 import (
    DSML,
    EOS,
    FC_CLOSE,
    FC_OPEN,
    INVOKE,
    INVOKE_CLOSE,
    PARAM,
    PARAM_CLOSE,
    TC_CLOSE,
    TC_OPEN,
)
from replay.parsers.deepseek_v32 import DeepSeekV32Parser as P
from strategies import json_values, text_with, with_reasoning

MARKS = [FC_OPEN, FC_CLOSE, TC_OPEN, TC_CLOSE, INVOKE, INVOKE_CLOSE, PARAM, PARAM_CLOSE, DSML, "<" + DSML, "</" + DSML, EOS, 'string="', '">']
SAFE_MARKS = [m for m in MARKS if m not in (PARAM_CLOSE, "</" + DSML, DSML)]  # may appear inside values
TOOLS = [
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"}, "s": {"type": "string"}, "x": {"type": "number"}, "b": {"type": "boolean"}, "o": {"type": "object"}}}}},
]


def param(key, value, flag=None):
    if flag is None:
        flag = "true" if isinstance(value, str) else "false"
        value = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f'{PARAM} name="{key}" string="{flag}">{value}{PARAM_CLOSE}'


def invoke(name, *params, sep="\n"):
    return f'{INVOKE} name="{name}">{sep}' + sep.join(params) + (sep if params else "") + INVOKE_CLOSE


str_values = st.one_of(st.text(max_size=8), st.sampled_from(["", " padded ", "a\nb", '"q"', "1", "true", "中文😀"]),
                       st.builds(lambda a, m: a + m, st.text(max_size=3), st.sampled_from(SAFE_MARKS)))


@st.composite
def dsml_param(draw):
    key = draw(st.sampled_from(["n", "s", "x", "b", "o", "city", "路径", ""]))
    kind = draw(st.sampled_from(["str", "json", "raw"]))
    if kind == "str":
        return param(key, draw(str_values))
    if kind == "json":
        return param(key, draw(json_values(SAFE_MARKS)))
    return param(key, draw(st.sampled_from(["1", " 2 ", "abc", "1.5", "tru", "{}", "[1,", "null"])), "false")


@st.composite
def dsml_invoke(draw):
    name = draw(st.sampled_from(["f", "get_weather", "a.b-c", "数据"]))
    if draw(st.integers(0, 5)) == 0:
        return f'{INVOKE} name="{name}">\n{json.dumps(draw(st.dictionaries(st.text(max_size=3), json_values(SAFE_MARKS), max_size=2)))}\n{INVOKE_CLOSE}'
    return invoke(name, *draw(st.lists(dsml_param(), max_size=3)), sep=draw(st.sampled_from(["\n", "", " "])))


dsml_malformed = st.one_of(
    st.builds(lambda t: f'{INVOKE} name="f">{t}{INVOKE_CLOSE}', text_with(MARKS)),
    st.builds(lambda t: f"{INVOKE}{t}>{INVOKE_CLOSE}", text_with(MARKS)),
    st.sampled_from(
        [
            f'{INVOKE} name="">{INVOKE_CLOSE}',
            f'{INVOKE} name="f">{PARAM} name="a" string="maybe">1{PARAM_CLOSE}{INVOKE_CLOSE}',
            f'{INVOKE} name="f">{PARAM} name="a" string="true">1{INVOKE_CLOSE}',
            f'{INVOKE} name="f">junk{PARAM} name="a" string="true">1{PARAM_CLOSE}{INVOKE_CLOSE}',
            f'{INVOKE} name="f">[1]{INVOKE_CLOSE}',
            f'{INVOKE} name="f">{PARAM} name="a" string="true">1{PARAM_CLOSE}',  # no invoke end
            "stray text ",
        ]
    ),
)


@st.composite
def dsml_bodies(draw):
    parts = [draw(text_with(MARKS))]
    for _ in range(draw(st.sampled_from([0, 1, 1, 2]))):
        opener = draw(st.sampled_from([FC_OPEN, FC_OPEN, TC_OPEN]))
        parts.append(opener + draw(st.sampled_from(["\n", "", " \n"])))
        for _ in range(draw(st.sampled_from([0, 1, 2, 3]))):
            parts.append(draw(st.one_of(dsml_invoke(), dsml_invoke(), dsml_malformed)))
            parts.append(draw(st.sampled_from(["\n", "", "\n\n"])))
        parts.append(draw(st.sampled_from([FC_CLOSE if opener == FC_OPEN else TC_CLOSE, FC_CLOSE, ""])))
        parts.append(draw(st.sampled_from(["", EOS, "\n", "tail"])))
    text = "".join(parts)
    if draw(st.booleans()) and draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


A = invoke("get_weather", param("city", "Paris"), param("days", 3))
B = invoke("get_time", param("tz", "Europe/Paris"))
TWO = f"{FC_OPEN}\n{A}\n{B}\n{FC_CLOSE}{EOS}"
CA, CB = call("get_weather", '{"city": "Paris", "days": 3}'), call("get_time", '{"tz": "Europe/Paris"}')
_I = TWO.index(INVOKE_CLOSE)
_J = _I + len(INVOKE_CLOSE) + 1 + len(INVOKE) + 3
CUT_INVOKE = f"{FC_OPEN}\n{A}\n{INVOKE} name=\"g\">\n{param('a', 1)}"
TYPED = FC_OPEN + invoke("f", param("n", "1", "false"), param("s", "1", "false"), param("x", "1.5", "false"),
                         param("b", "True", "false"), param("q", "[1]", "false"), param("s2", " 1 ", "true")) + FC_CLOSE
BAD = f'{INVOKE} name="f">{PARAM} name="a" string="maybe">1{PARAM_CLOSE}{INVOKE_CLOSE}'
V4 = f'{TC_OPEN}\n{INVOKE} name="now">\n{INVOKE_CLOSE}\n{INVOKE} name="j">{{"a": [1, "x"]}}{INVOKE_CLOSE}\n{TC_CLOSE}'
_INV = f'{FC_OPEN}\n{INVOKE} name="f">\n'

FAMILY = Family(
    cls=P,
    syntax=(
        Syntax(f'{_INV}{PARAM} name="a" string="false">', f"{PARAM_CLOSE}\n{INVOKE_CLOSE}\n{FC_CLOSE}", f'{FC_OPEN}{INVOKE} name="g">\n{INVOKE_CLOSE}{FC_CLOSE}', ""),
        Syntax(f'{_INV}{{"a": ', f"}}\n{INVOKE_CLOSE}\n{FC_CLOSE}", f'{FC_OPEN}{INVOKE} name="g">{{}}{INVOKE_CLOSE}{FC_CLOSE}'),
    ),
    properties=(
        Property("bodies", with_reasoning(dsml_bodies(), MARKS), base=60),
        Property("bodies-typed", with_reasoning(dsml_bodies(), MARKS), base=60, tools=TOOLS),
    ),
    examples=(
        Example(
            "two-calls-in-one-delta", "Let me check.\n\n" + TWO, ParseResult("Let me check.\n\n", (CA, CB)),
            streamed=((0, "get_weather", CA.arguments), (1, "get_time", CB.arguments)),
        ),
        Example(
            "tag-split-across-deltas", "ok <" + DSML + "function_calls>\n" + A + "\n</" + DSML + "function_calls>",
            deltas=("ok <", DSML + "function_", "calls>\n" + A[:-3], A[-3:], "\n</" + DSML, "function_calls>"),
            events=(Feed("ok "), Feed(), Feed(), Feed(calls=(CallDelta(0, "get_weather", CA.arguments),)), Feed(), Feed(), Feed()),
        ),
        Example("call-end-and-next-start-in-one-delta", TWO, ParseResult("", (CA, CB)), deltas=(TWO[:_I], TWO[_I:_J], TWO[_J:])),
        Example(
            "invoke-cut-off-is-no-call-finish-releases-it", CUT_INVOKE, ParseResult(f"{INVOKE} name=\"g\">\n{param('a', 1)}", (CA,)),
            deltas=(CUT_INVOKE,), events=(Feed(calls=(CallDelta(0, "get_weather", CA.arguments),)), Feed(f"{INVOKE} name=\"g\">\n{param('a', 1)}")),
            prefix_step=7,
        ),
        Example("zero-arg-call-v4-wrapper-json-body", V4, ParseResult("", (call("now", "{}"), call("j", '{"a": [1, "x"]}')))),
        Example("typing-string-false-values", TYPED, ParseResult("", (call("f", '{"n": 1, "s": "1", "x": 1.5, "b": true, "q": [1], "s2": " 1 "}'),)), tools=TOOLS),
        Example("typing-undeclared-is-json", TYPED, ParseResult("", (call("f", '{"n": 1, "s": 1, "x": 1.5, "b": "True", "q": [1], "s2": " 1 "}'),))),
        Example("malformed-invoke-is-content", f"{FC_OPEN}\n{BAD}\n{A}\n{FC_CLOSE}", ParseResult(BAD, (CA,))),
        Example("reasoning-open", "plan</think>\n\nok\n\n" + TWO, ParseResult("ok\n\n", (CA, CB), "plan"), reasoning_open=True),
        Example("reasoning-split", "<think>plan</think>" + TWO, ParseResult("", (CA, CB), "plan")),
    ),
    planted=TWO,
    finish=f"{FC_OPEN}\n{A}\n{INVOKE} name=\"g\">",
    long=(Long("string", f'{FC_OPEN}\n{INVOKE} name="f">\n{PARAM} name="a" string="true">' + "x</" * 350_000, None),),  # the open tag is framing
    corpus=(Corpus("deepseek_v3_2_dsml.jsonl", 11, dict(calls_only=True)),),
)
