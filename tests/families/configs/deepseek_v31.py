"""DeepSeek V3.1 / V3.1-Terminus tool calls: ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{JSON}<｜tool▁call▁end｜>``
in a ``<｜tool▁calls▁begin｜>`` section."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from families.spec import Example, Family, Feed, Property, Syntax, call
from replay.parsers import DeepSeekV31Parser as P
from replay.parsers.base import ParseResult
from replay.parsers.deepseek_v31 import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, EOS, SEP
from strategies import DUMP_STYLES, json_objects, plain_chars, text_with, with_reasoning, ws

DS_MARKERS = [CALLS_BEGIN, CALL_BEGIN, SEP, CALL_END, CALLS_END, EOS, CALL_END[:5], "<\uff5c"]


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


DS_TWO = (
    f"{CALLS_BEGIN}{CALL_BEGIN}get_weather{SEP}{{\"city\":\"Paris\", \"days\": 3}}{CALL_END}"
    f"{CALL_BEGIN}get_time{SEP}{{\"tz\": \"Europe/Paris\"}}{CALL_END}{CALLS_END}{EOS}"
)
A, B = call("get_weather", '{"city": "Paris", "days": 3}'), call("get_time", '{"tz": "Europe/Paris"}')
_I = DS_TWO.index(CALL_END)
_J = _I + len(CALL_END) + len(CALL_BEGIN) + 3
NO_END = f"{CALLS_BEGIN}{CALL_BEGIN}now{SEP}{{}}"
TRUNC = f"a{CALLS_BEGIN}{CALL_BEGIN}f{SEP}{{\"x\": "
BAD = f"{CALL_BEGIN}f{SEP}{{\"x\": }}{CALL_END}{CALL_BEGIN}g{SEP}{{}}{CALL_END}{EOS}"
EOS_SPLIT = ("ok", CALLS_END[:4], CALLS_END[4:] + EOS[:3], EOS[3:])


def tokens_built_from_code_points():
    """The DeepSeek tokens are U+FF5C and U+2581 glyphs, not ASCII look-alikes."""
    assert CALL_BEGIN == "<\uff5ctool\u2581call\u2581begin\uff5c>"
    assert EOS == "<\uff5cend\u2581of\u2581sentence\uff5c>"


FAMILY = Family(
    cls=P,
    syntax=(Syntax(f'{CALL_BEGIN}f{SEP}{{"a": ', f"}}{CALL_END}", f"{CALL_BEGIN}g{SEP}{{}}{CALL_END}"),),
    properties=(Property("outputs", with_reasoning(deepseek_outputs(), DS_MARKERS), base=120),),
    examples=(
        Example("two-calls-in-one-delta", "Sure." + DS_TWO, ParseResult("Sure.", (A, B)), streamed=((0, "get_weather", A.arguments), (1, "get_time", B.arguments))),
        Example("call-end-and-next-start-in-one-delta", DS_TWO, ParseResult("", (A, B)), deltas=(DS_TWO[:_I], DS_TWO[_I:_J], DS_TWO[_J:])),
        # a last call whose end marker never came is no call (SGLang's DeepSeekV31Detector); its section, holding none, is verbatim
        Example("call-without-end-marker-is-no-call", NO_END, ParseResult(NO_END, ()), deltas=(NO_END,), events=(Feed(), Feed(NO_END))),
        Example("zero-arg-call", NO_END + CALL_END + CALLS_END, ParseResult("", (call("now", "{}"),))),
        Example("truncated-call-is-content", TRUNC, ParseResult(TRUNC, ())),
        Example("malformed-json-is-content", BAD, ParseResult(f"{CALL_BEGIN}f{SEP}{{\"x\": }}{CALL_END}", (call("g", "{}"),))),
        # EOS (an end token) never reaches content; a stray section end with no section open is content verbatim
        Example("marker-split-and-eos-never-content", "".join(EOS_SPLIT), ParseResult("ok" + CALLS_END, ()), deltas=EOS_SPLIT),
    ),
    planted=DS_TWO,
    finish=f"{CALLS_BEGIN}{CALL_BEGIN}f{SEP}{{\"a\":1}}{CALL_END}{CALL_BEGIN}g{SEP}{{\"n\": 2}}",
    extra=(tokens_built_from_code_points,),
)
