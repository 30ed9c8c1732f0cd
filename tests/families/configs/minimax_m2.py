"""MiniMax-M2 tool calls: ``<minimax:tool_call>`` blocks of ``<invoke name="...">`` items with
``<parameter name="...">`` values typed by the declared schema."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from families.spec import Corpus, Example, Family, Feed, Long, Property, Syntax, call
from replay.parsers.base import CallDelta, ParseResult
from replay.parsers.minimax_m2 import END, INVOKE_CLOSE, INVOKE_OPEN, PARAM_CLOSE, PARAM_OPEN, START
from replay.parsers.minimax_m2 import MiniMaxM2Parser as P
from strategies import json_values, names, plain_chars, text_with

MM_MARKERS = [START, END, INVOKE_OPEN, INVOKE_CLOSE, PARAM_OPEN, PARAM_CLOSE, "<think>", "</think>", "<minimax:", "</inv", '">', ">"]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "s": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array"}}}}}]


def _value_text(value):
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _attr(draw, name):
    quote = draw(st.sampled_from(['"', '"', "'", ""]))
    return f"{quote}{name}{quote}"


@st.composite
def mm_invoke(draw):
    nl = draw(st.sampled_from(["\n", "\n", "", " "]))
    name = draw(st.one_of(names, st.sampled_from(["f", "get_weather"]))).replace("<", "").replace(">", "").strip() or "f"
    parts = [INVOKE_OPEN, _attr(draw, name), ">", nl]
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(["s", "n", "x", "b", "o", "a", "city"]) | st.text(plain_chars, min_size=1, max_size=4))
        key = key.replace("<", "").replace(">", "").strip() or "k"
        value = _value_text(draw(json_values(MM_MARKERS))).replace(PARAM_CLOSE, "")
        parts += [PARAM_OPEN, _attr(draw, key), ">", draw(st.sampled_from(["", "\n"])), value, PARAM_CLOSE, nl]
    parts.append(INVOKE_CLOSE)
    return "".join(parts)


@st.composite
def mm_block(draw):
    nl = draw(st.sampled_from(["\n", "", " \n"]))
    invokes = draw(st.lists(mm_invoke(), min_size=0, max_size=2))
    return START + nl + "".join(i + nl for i in invokes) + END


mm_malformed = st.one_of(
    st.builds(lambda t: f"{START}{t}{END}", text_with(MM_MARKERS)),
    st.builds(lambda t: f'{START}\n{INVOKE_OPEN}"f">{t}{INVOKE_CLOSE}\n{END}', text_with(MM_MARKERS)),
    st.sampled_from(
        [
            f'{START}\n{INVOKE_OPEN}"">\n{INVOKE_CLOSE}\n{END}',
            f'{START}\n{INVOKE_OPEN}"f<">\n{INVOKE_CLOSE}\n{END}',
            f'{START}\n{INVOKE_OPEN}"f">\n{PARAM_OPEN}"a">1{INVOKE_CLOSE}\n{END}',
            f'{START}\n{INVOKE_OPEN}"f">\n{INVOKE_CLOSE}junk{END}',
            f'{START}\n{INVOKE_OPEN}"f">x{PARAM_OPEN}"a">1{PARAM_CLOSE}{INVOKE_CLOSE}{END}',
            f'{START}\n{INVOKE_OPEN}"f">\n{INVOKE_CLOSE}\n{START}',
            f'{START}\n{INVOKE_OPEN}"f">\n{PARAM_OPEN}"a">1',
            f'{START}\n{INVOKE_OPEN}"f',
        ]
    ),
)


@st.composite
def mm_outputs(draw):
    parts = []
    if draw(st.integers(0, 3)) == 0:
        parts.append(draw(st.sampled_from(["", "<think>", "\n<think>"])) + draw(text_with(MM_MARKERS)) + "</think>" + draw(st.sampled_from(["", "\n\n"])))
    parts.append(draw(text_with(MM_MARKERS)))
    for _ in range(draw(st.sampled_from([0, 1, 1, 2]))):
        parts.append(draw(st.one_of(mm_block(), mm_block(), mm_malformed)))
        parts.append(draw(st.one_of(st.just(""), st.just("\n"), text_with(MM_MARKERS))))
    text = "".join(parts)
    ending = draw(st.sampled_from(["keep", "keep", "unterminated", "cut"]))
    if ending == "unterminated" and text.endswith(END):
        text = text[: -len(END)] + draw(st.sampled_from(["", "\n"]))
    elif ending == "cut" and text:
        text = text[: draw(st.integers(0, len(text)))]
    return text


INV_A = f'{INVOKE_OPEN}"get_weather">\n{PARAM_OPEN}"city">Paris{PARAM_CLOSE}\n{PARAM_OPEN}"days">3{PARAM_CLOSE}\n{INVOKE_CLOSE}\n'
INV_B = f'{INVOKE_OPEN}"get_time">\n{PARAM_OPEN}"tz">Europe/Paris{PARAM_CLOSE}\n{INVOKE_CLOSE}\n'
BLOCK = f"{START}\n{INV_A}{INV_B}{END}"
A, B = call("get_weather", '{"city": "Paris", "days": 3}'), call("get_time", '{"tz": "Europe/Paris"}')
SPLIT = ("Hi <minimax:tool", "_call>\n<invo", 'ke name="f">\n<param', 'eter name="a">1</para', "meter>\n</invoke>\n</minimax:tool", "_call> bye <mini")
TWO_BLOCKS = f'{START}\n{INV_A}{END}{START}\n{INV_B}{END}'
_I = TWO_BLOCKS.index(END)
_J = _I + len(END) + len(START) + 5
BETWEEN = f"{START}\n{INV_A}{INV_B}"
CUTS = (f'a{START}\n{INVOKE_OPEN}"f">\n{PARAM_OPEN}"x">1', f"a{START}\n", f'a{START}\n{INVOKE_OPEN}"f">\n', f"a{START}\n{INV_A}{INVOKE_OPEN}")
TYPED = f'{START}{INVOKE_OPEN}"f">{PARAM_OPEN}"s">\n1\n{PARAM_CLOSE}{PARAM_OPEN}"n">1{PARAM_CLOSE}{PARAM_OPEN}"u">[1, "a"]{PARAM_CLOSE}{PARAM_OPEN}"w"> two words {PARAM_CLOSE}{INVOKE_CLOSE}{END}'
BAD = f'{START}\n{INVOKE_OPEN}"f">\noops{INVOKE_CLOSE}\n{END}'
RESTART = f'{START}\n{INVOKE_OPEN}"f'
IN_VALUE = f'{START}{INVOKE_OPEN}"f">{PARAM_OPEN}"code">a{INVOKE_CLOSE}{END}b{PARAM_CLOSE}{INVOKE_CLOSE}{END}'
SKIPPED = {
    4: "continue_final_message: the text continues a prefilled assistant message ('Hello, ' and the reasoning are in the prompt)",
    5: "continue_final_message: the reasoning's first words are in the prompt, not in the text",
}

FAMILY = Family(
    cls=P,
    syntax=(Syntax('<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">', "</parameter>\n</invoke>\n</minimax:tool_call>", '<minimax:tool_call>\n<invoke name="g">\n</invoke>\n</minimax:tool_call>', ""),),
    properties=(
        Property("outputs", mm_outputs(), base=100),
        Property("outputs-typed", mm_outputs(), base=13, tools=TOOLS),
        Property("outputs-typed-open", mm_outputs(), base=13, tools=TOOLS, reasoning_open=True),
    ),
    examples=(
        Example(
            "two-invokes-in-one-delta", "Need both.\n</think>\n\n" + BLOCK, ParseResult("", (A, B), "Need both.\n"), reasoning_open=True,
            streamed=((0, *A.__dict__.values()), (1, *B.__dict__.values())),
        ),
        Example(
            "marker-and-tags-split-across-deltas", "".join(SPLIT), deltas=SPLIT,
            events=(Feed("Hi "), Feed(), Feed(), Feed(), Feed(), Feed(" bye ", (CallDelta(0, "f", '{"a": 1}'),)), Feed("<mini")),
        ),
        Example(
            "block-end-and-next-block-start-in-one-delta", TWO_BLOCKS, ParseResult("", (A, B)), deltas=(TWO_BLOCKS[:_I], TWO_BLOCKS[_I:_J], TWO_BLOCKS[_J:]),
            events=(None, Feed(calls=(CallDelta(0, *A.__dict__.values()),)), Feed(calls=(CallDelta(1, *B.__dict__.values()),)), Feed()),
        ),
        Example(
            "calls-reported-by-finish-when-block-is-cut-between-invokes", BETWEEN, ParseResult("", (A, B)),
            deltas=(BETWEEN,), events=(Feed(), Feed(calls=(CallDelta(0, *A.__dict__.values()), CallDelta(1, *B.__dict__.values())))),  # the block may still go on
        ),
        *(Example(f"cut-off-call-is-content-{k}", t, ParseResult(t), deltas=(t,), events=(Feed("a"), Feed(t[1:]))) for k, t in enumerate(CUTS)),
        Example("zero-arg-call", f'{START}\n{INVOKE_OPEN}"empty_args">\n{INVOKE_CLOSE}\n{END}', ParseResult("", (call("empty_args", "{}"),))),
        Example("empty-block", f"a{START}\n{END}b", ParseResult("ab")),
        Example("typing-and-value-newlines", TYPED, ParseResult("", (call("f", '{"s": "1", "n": 1, "u": [1, "a"], "w": " two words "}'),)), tools=TOOLS),
        Example("typing-undeclared", TYPED, ParseResult("", (call("f", '{"s": 1, "n": 1, "u": [1, "a"], "w": " two words "}'),))),
        Example("reasoning-split", "<think>plan</think>\n\nOK." + BLOCK, ParseResult("OK.", (A, B), "plan"), deltas=("<thi", "nk>pl", "an</th", "ink>\n", "\nOK.", BLOCK)),
        Example("reasoning-split-open", "<think>plan</think>\n\nOK." + BLOCK, reasoning_open=True),
        Example("reasoning-open-never-closed", "hm " + BLOCK, ParseResult("", (), "hm " + BLOCK), reasoning_open=True),
        Example("reasoning-end-only", "\n</think>\n\n" + BLOCK),
        Example("reasoning-end-only-open", "\n</think>\n\n" + BLOCK, reasoning_open=True),
        Example("malformed-block-is-content", BAD + BLOCK, ParseResult(BAD, (A, B))),
        Example("restarted-block-is-content", RESTART + BLOCK, ParseResult(RESTART, (A, B))),
        Example("end-markers-inside-value", IN_VALUE, ParseResult("", (call("f", '{"code": "a</invoke></minimax:tool_call>b"}'),))),
    ),
    planted="Let me check.\n" + BLOCK,
    finish=BETWEEN,
    finish_calls=True,
    long=(
        Long("value", f'{START}\n{INVOKE_OPEN}"f">\n{PARAM_OPEN}"a">' + "x<" * 500_000),
        Long("attribute", f'{START}\n{INVOKE_OPEN}"f' + "<minimax:" * 120_000),
        Long("whitespace", f"{START}" + " \n" * 500_000),
    ),
    corpus=(Corpus("minimax_m2.jsonl", 6, dict(skip=SKIPPED), with_calls=4),),
    public_bugs=("minimax_m2", "minimax-m2"),
)
