"""Qwen3-Coder XML tool calls (``<tool_call><function=NAME><parameter=KEY>``); the grammar is
shared with Seed-OSS (strategies.py: :func:`xml_outputs`, ``TYPED_TOOLS``)."""

from __future__ import annotations

from families.spec import Corpus, Example, Family, Feed, Long, Property, Syntax, call
from replay.parsers.base import CallDelta, ParseResult
from replay.parsers.qwen3_coder import Qwen3CoderParser as P
from strategies import CONTINUE, TYPED_TOOLS, llama_tools, prompt_opened, xml_outputs

CALL_A = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
CALL_B = "<tool_call>\n<function=get_time>\n<parameter=tz>\nEurope/Paris\n</parameter>\n</function>\n</tool_call>"
A = call("get_weather", '{"city": "Paris", "days": 3}')
B = call("get_time", '{"tz": "Europe/Paris"}')
READ = "<tool_call>\n<function=read>\n<parameter=page>\n1\n</parameter>\n<parameter=flag>\nTrue\n</parameter>\n</function>\n</tool_call>"


def read_tools(page_type):
    return [{"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {
        "page": {"type": page_type}, "flag": {"type": "boolean"}}}}}]


NONE_FORMAT = "reasoning_format NONE: expected content includes the prompt's opening think tag, which is not in text"
QWEN_SKIPS = {1: NONE_FORMAT, 23: NONE_FORMAT, 17: CONTINUE, 18: CONTINUE, 31: CONTINUE, 32: CONTINUE, 47: CONTINUE, 59: CONTINUE, 60: CONTINUE}
QWEN_NO_REASONING = {10: "text repeats the <think> llama.cpp's default thinking prompt already opened; expected reasoning keeps the literal tag"}
OPENED = "thinking " + CALL_A + "\n</think>\n\n" + CALL_B
BAD = "<tool_call>\n<function=f>\njunk\n</function>\n</tool_call>"
_PARAM = "<parameter=a>\n" + "x<" * 10 + "y" * 1000 + "\n"

FAMILY = Family(
    cls=P,
    syntax=(Syntax("<tool_call>\n<function=f>\n<parameter=a>\n", "\n</parameter>\n</function>\n</tool_call>", "<tool_call>\n<function=g>\n</function>\n</tool_call>", ""),),
    properties=(
        Property("plain", xml_outputs(P), base=60),
        Property("typed", xml_outputs(P), base=30, tools=TYPED_TOOLS),
        Property("open", xml_outputs(P), base=30, reasoning_open=True),
    ),
    examples=(
        Example(
            "token-split-across-two-deltas", "I'll look.\n" + CALL_A + "\n" + CALL_B,
            deltas=("I'll look.\n<tool_", CALL_A[6:], "\n<tool_call", CALL_B[10:]),
            events=(Feed("I'll look.\n"), Feed(calls=(CallDelta(0, "get_weather", A.arguments),)), Feed("\n"), Feed(calls=(CallDelta(1, "get_time", B.arguments),)), Feed()),
        ),
        Example(
            "several-calls-in-one-delta", "I'll look both up.\n" + CALL_A + "\n" + CALL_B, ParseResult("I'll look both up.\n\n", (A, B)),
            deltas=("I'll look both up.\n" + CALL_A + "\n" + CALL_B,), streamed=((0, *A.__dict__.values()), (1, *B.__dict__.values())),
        ),
        Example(
            "call-end-and-next-start-in-one-delta", CALL_A + CALL_B, ParseResult("", (A, B)),
            deltas=(CALL_A[: len(CALL_A) - 24], CALL_A[len(CALL_A) - 24 :] + CALL_B[:25], CALL_B[25:]),
        ),
        Example(
            "call-completed-only-at-finish", "<tool_call>\n<function=f>\n<parameter=n>\n12\n</parameter>\n</function>\n",
            ParseResult("", (call("f", '{"n": 12}'),)),
            deltas=("<tool_call>\n<function=f>\n<parameter=n>\n12\n</parameter>\n</function>\n",),
            events=(Feed(), Feed(calls=(CallDelta(0, "f", '{"n": 12}'),))),  # </tool_call> may still follow
        ),
        Example("call-cut-off-is-content", "x<tool_call>\n<function=f>\n<parameter=n>\n12", ParseResult("x<tool_call>\n<function=f>\n<parameter=n>\n12", ())),
        Example("zero-arg-call", "<tool_call>\n<function=current_time>\n</function>\n</tool_call>", ParseResult("", (call("current_time", "{}"),))),
        Example("typing-integer", READ, ParseResult("", (call("read", '{"page": 1, "flag": true}'),)), tools=read_tools("integer")),
        Example("typing-string", READ, ParseResult("", (call("read", '{"page": "1", "flag": true}'),)), tools=read_tools("string")),
        Example("typing-undeclared", READ, ParseResult("", (call("read", '{"page": 1, "flag": "True"}'),))),  # JSON or text
        Example(
            "reasoning-split", "<think>\nLet me call <tool_call> maybe.\n</think>\n\nOK.\n" + CALL_B,
            ParseResult("OK.\n", (B,), "\nLet me call <tool_call> maybe.\n"),
        ),
        Example("reasoning-open", OPENED, ParseResult("", (B,), "thinking " + CALL_A + "\n"), reasoning_open=True),
        Example(
            "missing-parameter-end-and-value-newlines", "<tool_call><function=f><parameter=a>\n\nx\n\n<parameter=b>2</function></tool_call>",
            ParseResult("", (call("f", '{"a": "\\nx\\n", "b": 2}'),)),
        ),
        Example("malformed-block-is-content", BAD + "\n" + CALL_B + "</tool_call>", ParseResult(BAD + "\n</tool_call>", (B,))),
    ),
    planted="Let me check.\n" + CALL_A + "\n" + CALL_B,
    finish=CALL_A + "\n" + CALL_B[: -len("</tool_call>")],
    finish_calls=True,
    long=(Long("parameters", "<tool_call>\n<function=f>\n" + (_PARAM * 1000)[: 1 << 20]),),
    corpus=(
        Corpus("qwen3_coder_xml.jsonl", 52, dict(skip=QWEN_SKIPS, reasoning_open_rule=prompt_opened(P.THINK), tools_for=llama_tools, no_reasoning=QWEN_NO_REASONING), skipped=len(QWEN_SKIPS)),
    ),
    public_bugs=("qwen3_coder",),
    public_bug_ids=("B01", "B02", "B51"),
)
