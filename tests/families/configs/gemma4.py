"""Gemma 4 tool calls: ``<|tool_call>call:NAME{key:value,...}<tool_call|>`` in Gemma's value
notation (strings between ``<|"|>``), reasoning in ``<|channel>thought ...<channel|>``."""

from __future__ import annotations

from hypothesis import strategies as st

from families.spec import Corpus, Example, Family, Feed, Long, Property, Syntax, call
from replay.parsers.base import CallDelta, ParseResult
from replay.parsers.gemma4 import CH_END, CH_START, END, START, STR, TOOL_RESPONSE, TURN_END
from replay.parsers.gemma4 import Gemma4Parser as P
from strategies import prompt_opened, text_with

G_MARKERS = [START, END, STR, CH_START, CH_END, TOOL_RESPONSE, TURN_END, "<|tool", "<tool_", "}", "{", ":", ","]

str_text = st.one_of(
    st.text(max_size=6).filter(lambda s: STR not in s),
    st.sampled_from(["}<tool_call|>", START, "a,b:c", "é中😀", "\n", "\\", '"', CH_END, "{[", "<|\"", "|>"]),
)
keys = st.one_of(st.sampled_from(["city", "n", "a_b", "x-y", "é"]), st.text("abcXYZ_ 9", min_size=1, max_size=4).filter(str.strip))
bare_values = st.one_of(
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["true", "false", "null", "None", "nil", "1.5e10", "108.", "abc", "1e5", " 7 ", "-0.0"]),
)


def gemma_value(depth=2):
    leaf = st.one_of(str_text.map(lambda s: STR + s + STR), bare_values)
    if depth == 0:
        return leaf
    sub = gemma_value(depth - 1)
    return st.one_of(leaf, leaf, st.lists(sub, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"), gemma_object(sub))


def gemma_object(values):
    pair = st.tuples(st.one_of(keys, keys.map(lambda k: STR + k + STR)), values).map(lambda kv: f"{kv[0]}:{kv[1]}")
    return st.lists(pair, max_size=3).map(lambda ps: "{" + ",".join(ps) + "}")


names = st.one_of(st.sampled_from(["get_weather", "f", "a.b", "x-1"]), st.text("abc_.-9é", min_size=1, max_size=4))


@st.composite
def gemma_call(draw):
    return f"{START}call:{draw(names)}{draw(gemma_object(gemma_value()))}{draw(st.sampled_from(['', '', ' ', chr(10)]))}{END}"


malformed = st.one_of(
    st.builds(lambda t: f"{START}{t}{END}", text_with(G_MARKERS)),
    st.builds(lambda t: f"{START}call:f{{{t}}}{END}", text_with(G_MARKERS)),
    st.sampled_from(
        [
            f"{START}call:{{a:1}}{END}",
            f"{START}call:f{{a:}}{END}",
            f"{START}call:f{{a:1}} junk{END}",
            f"{START}call:f{{a:{{}}b:1}}{END}",
            f"{START}call:f{{a:{STR}open}}{END}tail",
            f"{START}call:f{{a:1]{END}",
            f"{START}call f{{}}{END}",
            f"{START}call:f{{a:1<x}}{END}",
        ]
    ),
)


@st.composite
def gemma_outputs(draw):
    parts = []
    if draw(st.booleans()):
        parts.append(CH_START + draw(st.sampled_from(["thought\n", "thought", "", "thoughtful "])) + draw(text_with(G_MARKERS)) + draw(st.sampled_from([CH_END, CH_END, ""])))
    parts.append(draw(text_with(G_MARKERS)))
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        parts.append(draw(st.one_of(gemma_call(), gemma_call(), malformed)))
        parts.append(draw(st.one_of(st.just(""), st.sampled_from([TOOL_RESPONSE, TURN_END, "\n", CH_START + "thought\nhm" + CH_END]), text_with(G_MARKERS))))
    text = "".join(parts)
    ending = draw(st.sampled_from(["keep", "keep", "unterminated", "cut"]))
    if ending == "unterminated" and text.endswith(END):
        text = text[: -len(END)] + draw(st.sampled_from(["", " ", "\n"]))
    elif ending == "cut" and text:
        text = text[: draw(st.integers(0, len(text)))]
    return text


CALL_A = f'{START}call:get_weather{{city:{STR}Paris{STR},days:3}}{END}'
CALL_B = f'{START}call:get_time{{tz:{STR}Europe/Paris{STR}}}{END}'
A, B = call("get_weather", '{"city": "Paris", "days": 3}'), call("get_time", '{"tz": "Europe/Paris"}')
K = len(CALL_A)
SPLIT = ("Hi <|tool", "_call>call:f{a:<|", '"|>x<|"|>}<tool', "_call|> bye <|tool_")
VALUES = f"{START}call:f{{a:[1,{STR}x}}<tool_call|>{STR},{{b:true}}],c:1.5,d:None,e:108.,f:1e5,<|\"|>k k<|\"|>:-7}}{END}"
TYPED_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}}}]
CUT_STR = f"{START}call:f{{a:{STR}x{END}y{STR},b:{STR}z{STR}}}{END}"
THOUGHTS = f"{CH_START}thought\nplan{CH_END}Answer{CALL_A}{CH_START}thought\nmore{CH_END}{TOOL_RESPONSE}"
CORPUS_SKIPS = {
    3: "llama.cpp reasoning_format NONE: reasoning left in content with its markers (a client option)",
    24: "continue_final_message: reasoning and the start of the answer are in the prompt, not in the text",
    25: "continue_final_message: the reasoning is partly in the prompt",
}


def _long(filler):
    if filler[0] != "{":
        return f"{START}call:f{{a:{STR}" + filler * (1_000_000 // len(filler))
    return f"{START}call:f{{a:" + filler * 500_000


FAMILY = Family(
    cls=P,
    syntax=(Syntax(f"{START}call:f{{a:", f"}}{END}", f"{START}call:g{{}}{END}", STR, "gemma4"),),
    properties=(Property("outputs", gemma_outputs(), base=100), Property("open", gemma_outputs(), base=25, reasoning_open=True)),
    examples=(
        Example("two-calls-in-one-delta", "Sure." + CALL_A + CALL_B, ParseResult("Sure.", (A, B)), streamed=((0, *A.__dict__.values()), (1, *B.__dict__.values()))),
        Example(
            "marker-split-across-deltas", "".join(SPLIT), deltas=SPLIT,
            events=(Feed("Hi "), None, None, Feed(" bye ", (CallDelta(0, "f", '{"a": "x"}'),)), Feed("<|tool_")),
        ),
        Example("call-end-and-next-start-in-one-delta", CALL_A + CALL_B, ParseResult("", (A, B)), deltas=((CALL_A + CALL_B)[: K - 4], (CALL_A + CALL_B)[K - 4 : K + 15], (CALL_A + CALL_B)[K + 15 :])),
        Example(
            "call-completed-only-at-finish", f"{START}call:f{{n:12}}",  # the end marker may follow
            deltas=(f"{START}call:f{{n:12}}",), events=(Feed(), Feed(calls=(CallDelta(0, "f", '{"n": 12}'),))),
        ),
        Example("cut-off-call-is-content", f"x{START}call:f{{a:{STR}Par", ParseResult(f"x{START}call:f{{a:{STR}Par", ())),
        Example("zero-arg-call", f"{START}call:now{{}}{END}", ParseResult("", (call("now", "{}"),))),
        Example("values", VALUES, ParseResult("", (call("f", '{"a": [1, "x}<tool_call|>", {"b": true}], "c": 1.5, "d": null, "e": 108.0, "f": "1e5", "k k": -7}'),))),
        Example("no-schema-typing-notation-carries-types", f"{START}call:f{{a:1,b:{STR}1{STR}}}{END}", ParseResult("", (call("f", '{"a": 1, "b": "1"}'),)), tools=TYPED_TOOLS),
        Example(
            # a delta ends inside a string delimiter after an end marker inside an earlier string:
            # the grammar must wait (the delimiter may complete), not call the block malformed
            "delimiter-cut-after-end-marker-in-a-string", CUT_STR, ParseResult("", (call("f", '{"a": "x<tool_call|>y", "b": "z"}'),)),
            deltas=(CUT_STR[: CUT_STR.index(",b:") + 5], CUT_STR[CUT_STR.index(",b:") + 5 :]),
        ),
        Example("reasoning-split", THOUGHTS, ParseResult("Answer", (A,), "planmore")),
        Example("reasoning-open", f"thought\nx{CH_END}y", ParseResult("y", (), "thought\nx"), reasoning_open=True),
    ),
    planted=CALL_A + CALL_B,
    finish=CALL_A + f"{START}call:g{{n:1}}",
    finish_calls=True,
    long=tuple(Long(f"filler-{k}", _long(f), None) for k, f in enumerate([STR[:-1] + "x", "{[", "a:" + STR])),
    corpus=(Corpus("gemma4.jsonl", 23, dict(skip=CORPUS_SKIPS, reasoning_open_rule=prompt_opened(None), property_on_all=True)),),
    public_bugs=("gemma4",),
)
