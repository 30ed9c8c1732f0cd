"""StepFun Step-3 tool calls: ``<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="...">``
with ``<steptml:parameter name="...">`` values, ``<｜tool_call_end｜>``, in a
``<｜tool_calls_begin｜>`` section. Its upstream cases (vLLM ``test_step3_tool_parser.py``) are in
``tests/conformance/vllm.jsonl`` (``vllm-step3-*``) and run in the family suite."""

from __future__ import annotations

from hypothesis import strategies as st

from families.spec import Example, Family, Property, Syntax
from families.spec import call as tool_call
from replay.parsers.base import ParseResult
from replay.parsers.step3 import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, SEP
from replay.parsers.step3 import Step3Parser as P
from replay.stream import check_stream_equals_whole
from strategies import all_chunkings

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]


def call(name: str, params: dict[str, str], *, header: str = "function" + SEP) -> str:
    body = "".join(f'<steptml:parameter name="{k}">{v}</steptml:parameter>' for k, v in params.items())
    return f'{CALL_BEGIN}{header}<steptml:invoke name="{name}">{body}</steptml:invoke>{CALL_END}'


def section(*calls: str) -> str:
    return CALLS_BEGIN + "".join(calls) + CALLS_END


_values = st.one_of(
    st.sampled_from(["Paris", " 3 ", "true", "null", '{"a": [1]}', "x<y", "", "\n", CALL_END[:4], "</steptml:invoke>"]),
    st.text(max_size=5),
)
_params = st.dictionaries(st.sampled_from(["city", "days", "q", ""]), _values, max_size=3)
_blocks = st.one_of(
    st.builds(lambda n, p: call(n, p), st.sampled_from(["get_weather", "f", ""]), _params),
    st.builds(lambda p: call("f", p, header=""), _params),
    st.builds(lambda p: call("f", p, header="action" + SEP), _params),
    st.builds(lambda c, k: c[:k], st.builds(lambda p: call("f", p), _params), st.integers(0, 80)),  # cut off
    st.sampled_from([CALLS_BEGIN, CALLS_END, SEP, CALL_END, "\n", "Sure. ", "<steptml:invoke", CALL_BEGIN + "junk" + CALL_END]),
)
outputs = st.lists(_blocks, max_size=5).map("".join)

PROSE = "Checking. " + section(call("get_weather", {"city": "Paris", "days": "3"}), SEP, call("f", {})) + " Done."
WS = section(call("get_weather", {"city": "  Paris \n", "days": " 4 ", "extra": " [1, 2] "}))
CUT = CALLS_BEGIN + call("f", {"a": "1"})[: -len(CALL_END)]
BAD = f'{CALL_BEGIN}<steptml:invoke name="f">stray text</steptml:invoke>{CALL_END}'
IN_VALUE = call("f", {"a": "x" + CALL_END + "y"})
FINISH = "Sure. " + section(call("f", {"a": "1"})) + " ok " + CALL_BEGIN[:3]  # held back until finish()


class Step3EarlyBlock(P):
    """Planted bug of the grammar engine: a block decided on a prefix without its end marker (a guess)."""

    def read(self, text, s, mark, final):
        return super().read(text, s, mark, True)


def early_block_is_caught():
    assert check_stream_equals_whole(Step3EarlyBlock, FINISH, all_chunkings(Step3EarlyBlock, FINISH))


FAMILY = Family(
    cls=P,
    syntax=(Syntax(
        f'{CALL_BEGIN}function{SEP}<steptml:invoke name="f"><steptml:parameter name="a">',
        f"</steptml:parameter></steptml:invoke>{CALL_END}",
        f'{CALL_BEGIN}function{SEP}<steptml:invoke name="g"></steptml:invoke>{CALL_END}',
        "",
    ),),
    properties=(
        Property("plain", outputs, base=40),
        Property("typed", outputs, base=40, tools=TOOLS),
        Property("open", outputs.map(lambda t: "reasoning</think>" + t), base=40, reasoning_open=True),
    ),
    examples=(
        Example(
            "section-calls-and-prose", PROSE, ParseResult("Checking.  Done.", (tool_call("get_weather", '{"city": "Paris", "days": 3}'), tool_call("f", "{}"))),
            tools=TOOLS, deltas=(PROSE[:20], PROSE[20:61], PROSE[61:]),
        ),
        Example("string-values-keep-whitespace-undeclared-are-json", WS, ParseResult("", (tool_call("get_weather", '{"city": "  Paris \\n", "days": 4, "extra": [1, 2]}'),)), tools=TOOLS),
        Example("header-is-optional", call("f", {"a": "1"}, header=""), ParseResult("", (tool_call("f", '{"a": 1}'),))),
        Example("header-function-with-name-line", call("f", {}, header="function" + SEP + "f\n"), ParseResult("", (tool_call("f", "{}"),))),
        Example("header-must-be-function", call("f", {}, header="action" + SEP), ParseResult(call("f", {}, header="action" + SEP))),
        Example("call-cut-off-is-content", CUT, ParseResult(CUT[len(CALLS_BEGIN) :])),
        Example("malformed-block-is-content-verbatim", "a" + BAD + "b", ParseResult("a" + BAD + "b")),
        # the block ends at the first <｜tool_call_end｜> (SGLang's non-greedy regex): malformed, content up to there
        Example("call-end-marker-in-a-value-ends-the-block", IN_VALUE, ParseResult(IN_VALUE, ())),
    ),
    planted="Sure. " + section(call("get_weather", {"city": "Paris"}), call("f", {"a": "1"})),
    finish=FINISH,
    extra=(early_block_is_caught,),
)
