"""Mistral tool calls: ``[TOOL_CALLS]`` then a JSON array (pre-v11) or ``NAME[CALL_ID]id[ARGS]{...}``
(v11+); reasoning in ``[THINK]...[/THINK]``."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from families.spec import Corpus, Example, Family, Feed, Long, Property, Syntax, call
from replay.parsers.base import CallDelta, ParseResult
from replay.parsers.mistral import ARGS, CALL_ID, THINK_TAGS, TOOL_CALLS
from replay.parsers.mistral import MistralParser as P
from replay.stream import split
from strategies import DUMP_STYLES, json_objects, names, prompt_opened, text_with, ws

M_MARKERS = [TOOL_CALLS, ARGS, CALL_ID, *THINK_TAGS, "[TOOL", "_CALLS]", "[/TH", "[", "]"]


def _dump(obj, style):
    return json.dumps(obj, **style)


@st.composite
def v11_call(draw):
    name = draw(st.one_of(names, st.sampled_from(["special_function", "get_weather", " f "])))
    args = _dump(draw(json_objects(M_MARKERS)), draw(st.sampled_from(DUMP_STYLES)))
    call_id = draw(st.sampled_from(["", "", f"{CALL_ID}a1B2c3D4e", f"{CALL_ID}000000001"]))
    sep = draw(st.sampled_from([ARGS, ARGS, ARGS, ""]))  # vLLM also ends the name at "{"
    if sep == "" and not args.startswith("{"):
        sep = ARGS
    return f"{TOOL_CALLS}{name}{call_id}{sep}{draw(ws)}{args}{draw(ws)}"


@st.composite
def array_call(draw):
    items = []
    for _ in range(draw(st.integers(1, 3))):
        item = {"name": draw(names)}
        if draw(st.integers(0, 4)):
            item["arguments"] = draw(json_objects(M_MARKERS))
        if draw(st.booleans()):
            item["id"] = draw(st.sampled_from(["123456789", "a1B2c3D4e"]))
        items.append(item)
    body = _dump(items, draw(st.sampled_from(DUMP_STYLES)))
    return f"{TOOL_CALLS}{draw(st.sampled_from(['', ' ', chr(10)]))}{body}{draw(ws)}"


m_malformed = st.one_of(
    st.builds(lambda t: TOOL_CALLS + t, text_with(M_MARKERS)),
    st.builds(lambda t: f"{TOOL_CALLS}f{ARGS}{t}", text_with(M_MARKERS)),
    st.sampled_from(
        [
            f"{TOOL_CALLS}f{ARGS}[1, 2]",
            f'{TOOL_CALLS}f{ARGS}{{"a": 1}} junk',
            f"{TOOL_CALLS}{{}}",
            f"{TOOL_CALLS}[]",
            f'{TOOL_CALLS}[{{"name": 1, "arguments": {{}}}}]',
            f'{TOOL_CALLS} [{{"name": "f", "arguments": "x"}}]',
            f'{TOOL_CALLS}[{{"name": "f", "arguments": {{}}}}] tail',
            f"{TOOL_CALLS}f{CALL_ID}",
            f"{TOOL_CALLS}f{CALL_ID}abc",
            f'{TOOL_CALLS}f{ARGS}{{"a": 1.}}',
            f"{TOOL_CALLS}f{ARGS}1.",
            f"{TOOL_CALLS}f{ARGS}",
            f"{TOOL_CALLS}   ",
            f'{TOOL_CALLS}f{ARGS}"{TOOL_CALLS}"',
            f"{TOOL_CALLS}{ARGS}{{}}",
        ]
    ),
)


@st.composite
def mistral_outputs(draw):
    """``(text, reasoning_open)``."""
    head, ro = draw(
        st.one_of(
            st.just(("", False)),
            st.just(("", False)),
            st.builds(lambda r, w: (f"[THINK]{r}[/THINK]{w}", False), text_with(M_MARKERS), ws),
            st.builds(lambda r, w: (f"[THINK]{r}[/THINK]{w}", False), text_with(M_MARKERS), ws),
            st.builds(lambda r: (f"{r}[/THINK]", True), text_with(M_MARKERS)),
            st.builds(lambda r: (f"[THINK]{r}", False), text_with(M_MARKERS)),
        )
    )
    parts = [head, draw(st.one_of(st.just(""), text_with(M_MARKERS)))]
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        parts.append(draw(st.one_of(v11_call(), v11_call(), v11_call(), array_call(), array_call(), m_malformed)))
        parts.append(draw(st.sampled_from(["", "", "", "", "\n", " x "])))
    text = "".join(parts)
    if draw(st.integers(0, 5)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text, ro


TWO_V11 = f'{TOOL_CALLS}get_weather{CALL_ID}a1B2c3D4e{ARGS}{{"city": "Paris", "days": 3}}{TOOL_CALLS}get_time{ARGS}{{"tz":"Europe/Paris"}}'
A, B = call("get_weather", '{"city": "Paris", "days": 3}'), call("get_time", '{"tz": "Europe/Paris"}')
ARRAY = '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}, "id": "123456789"}, {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}]'
NEXT = (f'{TOOL_CALLS}f{ARGS}{{"a": 1', f"}}\n{TOOL_CALLS}g{ARGS}{{", "}")
CUT = f'ok {TOOL_CALLS}f{ARGS}{{"a": "par'
THINKING = f'[THINK]Let me think about {TOOL_CALLS}f{ARGS}{{}} first[/THINK]\n{TOOL_CALLS}g{ARGS}{{"x": true}}'
JUNK = f'{TOOL_CALLS}f{ARGS}{{"a": 1}} junk'
GOOD = f"{TOOL_CALLS}g{ARGS}{{}}"
INSIDE = f'{TOOL_CALLS}f{ARGS}{{"s": "a{TOOL_CALLS}b"}}'
DEEP = "[" * 3000 + "]" * 3000
DEEP_ARG = f'{TOOL_CALLS}f{ARGS}{{"a": {DEEP}}}{TOOL_CALLS}g{ARGS}{{}}'
SKIPPED = {
    1: "reasoning_format none: llama.cpp leaves [THINK]...[/THINK] in content; the parser always splits it",
    6: "json_schema response format: llama.cpp strips the ```json fence from content",
    8: "continue_final_message: the expected message includes the prefilled text",
    9: "continue_final_message: the expected reasoning and content include the prefilled text",
    12: "continue_final_message: the expected content includes the prefilled text",
    16: "continue_final_message: the expected content includes the prefilled text",
}
#: No Mistral template opens [THINK] in the prompt (the model writes it; vLLM enters reasoning only
#: once [THINK] was generated), so ``enable_thinking`` is not a sign of an opened section: only an
#: end tag without a start tag is.
OPENED = prompt_opened(THINK_TAGS, flag=False)

FAMILY = Family(
    cls=P,
    syntax=(Syntax(f'{TOOL_CALLS}f{ARGS}{{"a": ', "}", f"{TOOL_CALLS}g{ARGS}{{}}"),),
    properties=(Property("outputs", mistral_outputs(), base=100),),
    examples=(
        Example("v11-two-calls-call-id-not-in-name", "Checking." + TWO_V11, ParseResult("Checking.", (A, B)), streamed=((0, *A.__dict__.values()), (1, *B.__dict__.values()))),
        Example("pre-v11-array-with-space-and-ids", ARRAY, ParseResult("", (A, B))),
        Example(
            "marker-split-across-deltas", 'Hi [TOOL_CALLS]f[ARGS]{"a": 1}', deltas=("Hi [TOOL", "_CALLS]f[AR", 'GS]{"a": 1}'),
            events=(Feed("Hi "), Feed(), Feed(), Feed(calls=(CallDelta(0, "f", '{"a": 1}'),))),
        ),
        Example(
            "several-calls-in-one-delta-last-reported-by-finish", TWO_V11, deltas=(TWO_V11,),
            # the first call is decided by the next [TOOL_CALLS]; nothing follows the second: only the end decides it
            events=(Feed(calls=(CallDelta(0, "get_weather", A.arguments),)), Feed(calls=(CallDelta(1, "get_time", B.arguments),))),
        ),
        Example(
            "call-end-and-next-start-in-one-delta", "".join(NEXT), ParseResult("", (call("f", '{"a": 1}'), call("g", "{}"))), deltas=NEXT,
            events=(None, Feed(calls=(CallDelta(0, "f", '{"a": 1}'),)), None, Feed(calls=(CallDelta(1, "g", "{}"),))),
        ),
        Example("cut-off-call-is-content", CUT, ParseResult(CUT, ())),
        Example("zero-arg-v11-call", f"{TOOL_CALLS}now{ARGS}{{}}", ParseResult("", (call("now", "{}"),))),
        Example("zero-arg-array-call", '[TOOL_CALLS][{"name": "now"}]', ParseResult("", (call("now", "{}"),))),  # absent arguments: {}
        Example(
            "tools-do-not-retype-json-arguments", f'{TOOL_CALLS}f{ARGS}{{"n": "1", "m": 1}}', ParseResult("", (call("f", '{"n": "1", "m": 1}'),)),
            tools=[{"type": "function", "function": {"name": "f", "parameters": {"properties": {"n": {"type": "integer"}}}}}],
        ),
        Example("reasoning-split", THINKING, ParseResult("", (call("g", '{"x": true}'),), f"Let me think about {TOOL_CALLS}f{ARGS}{{}} first")),
        Example("reasoning-open", "plan[/THINK]Answer.", ParseResult("Answer.", (), "plan"), reasoning_open=True),
        Example("junk-after-the-json-is-content", JUNK + GOOD, ParseResult(JUNK, (call("g", "{}"),))),
        Example("call-id-without-args-is-content", f"{TOOL_CALLS}f{CALL_ID}x{GOOD}", ParseResult(f"{TOOL_CALLS}f{CALL_ID}x", (call("g", "{}"),))),
        Example("empty-array-is-content", f"{TOOL_CALLS}[]", ParseResult(f"{TOOL_CALLS}[]", ())),
        Example("v11-array-arguments-is-content", f"{TOOL_CALLS}f{ARGS}[1]", ParseResult(f"{TOOL_CALLS}f{ARGS}[1]", ())),
        Example("marker-inside-an-argument-string", INSIDE, ParseResult("", (call("f", json.dumps({"s": f"a{TOOL_CALLS}b"})),))),
        # too deep JSON: content, not a crash (the property's every-split run is too slow on 6,000 chars)
        Example("too-deep-arguments-are-content", DEEP_ARG, ParseResult(DEEP_ARG.split(f"{TOOL_CALLS}g")[0], (call("g", "{}"),)),
                deltas=tuple(split(DEEP_ARG, "fixed-13", markers=P.markers)), check_property=False),
        Example("too-deep-array-is-content", f"{TOOL_CALLS}{DEEP}", ParseResult(f"{TOOL_CALLS}{DEEP}", ()),
                deltas=tuple(split(f"{TOOL_CALLS}{DEEP}", "fixed-40", markers=P.markers)), check_property=False),
    ),
    planted=f'{TOOL_CALLS}f{ARGS}{{"a": 1}}{TOOL_CALLS}g{ARGS}{{"b": [1, 2]}}',
    finish=f'{TOOL_CALLS}f{ARGS}{{"a": 1}}{TOOL_CALLS}g{ARGS}{{"b": [1, 2]}}',
    finish_calls=True,
    long=(
        Long("string", f'{TOOL_CALLS}f{ARGS}{{"a": "' + "x" * 1_000_000),
        Long("name", TOOL_CALLS + "n" * 1_000_000),
        Long("array", '[TOOL_CALLS][{"name": "f", "arguments": {"a": [' + "1, " * 330_000),
        Long("nesting", TOOL_CALLS + "[" * 1_000_000),
    ),
    corpus=(Corpus("mistral.jsonl", 16, dict(skip=SKIPPED, reasoning_open_rule=OPENED), with_calls=10),),
    public_bugs=("mistral",),
)
