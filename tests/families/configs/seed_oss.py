"""Seed-OSS XML tool calls: Qwen3-Coder's ``<function=..>`` grammar (``replay/parsers/_xmlcall.py``)
with Seed-OSS's tags (``<seed:tool_call>``, ``<seed:think>``)."""

from __future__ import annotations

from families.spec import Corpus, Example, Family, Feed, Long, Property, Syntax, call
from replay.parsers.base import CallDelta, ParseResult
from replay.parsers.seed_oss import SeedOssParser as P
from strategies import CONTINUE, TYPED_TOOLS, llama_tools, prompt_opened, xml_outputs

S, E = "<seed:tool_call>", "</seed:tool_call>"
CALL_A = f"{S}\n<function=get_weather>\n<parameter=city>Paris</parameter>\n<parameter=days>3</parameter>\n</function>\n{E}"
CALL_B = f"{S}\n<function=get_time>\n<parameter=tz>Europe/Paris</parameter>\n</function>\n{E}"
A = call("get_weather", '{"city": "Paris", "days": 3}')
B = call("get_time", '{"tz": "Europe/Paris"}')
READ = f"{S}\n<function=read>\n<parameter=page>1</parameter>\n</function>\n{E}"
I = len(CALL_A) - len(f"</function>\n{E}")
J = len(f"{S}\n<function=get")


def read_tools(t):
    return [{"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {"page": {"type": t}}}}}]


def tags_and_markers():
    """The family's own tags: Seed-OSS writes ``<seed:...>`` tags, not Qwen's."""
    assert P.START == S and P.END == E and P.THINK == ("<seed:think>", "</seed:think>")
    assert set(P.markers) >= {S, E, "<seed:think>", "</seed:think>"} and P.name == "seed_oss"


FAMILY = Family(
    cls=P,
    syntax=(Syntax(f"{S}\n<function=f>\n<parameter=a>\n", f"\n</parameter>\n</function>\n{E}", f"{S}\n<function=g>\n</function>\n{E}", ""),),
    properties=(
        Property("plain", xml_outputs(P), base=60),
        Property("typed", xml_outputs(P), base=30, tools=TYPED_TOOLS),
        Property("open", xml_outputs(P), base=30, reasoning_open=True),
    ),
    examples=(
        Example(
            "token-split-across-two-deltas", "Sure.\n" + CALL_A + "\n" + CALL_B,
            deltas=("Sure.\n<seed:tool", CALL_A[len("<seed:tool") :], "\n" + CALL_B[:5], CALL_B[5:]),
            events=(Feed("Sure.\n"), Feed(calls=(CallDelta(0, "get_weather", A.arguments),)), Feed("\n"), Feed(calls=(CallDelta(1, "get_time", B.arguments),)), Feed()),
        ),
        Example(
            "several-calls-in-one-delta", "Sure.\n" + CALL_A + "\n" + CALL_B, ParseResult("Sure.\n\n", (A, B)),
            streamed=((0, "get_weather", A.arguments), (1, "get_time", B.arguments)),
        ),
        Example("call-end-and-next-start-in-one-delta", CALL_A + CALL_B, ParseResult("", (A, B)), deltas=(CALL_A[:I], CALL_A[I:] + CALL_B[:J], CALL_B[J:])),
        Example(
            "call-completed-only-at-finish", f"{S}\n<function=f>\n<parameter=n>12</parameter>\n</function>",
            deltas=(f"{S}\n<function=f>\n<parameter=n>12</parameter>\n</function>",), events=(Feed(), Feed(calls=(CallDelta(0, "f", '{"n": 12}'),))),
        ),
        Example("call-cut-off-is-content", f"{S}\n<function=calculate_sum>\n<parameter=numbers>[1,\n", ParseResult(f"{S}\n<function=calculate_sum>\n<parameter=numbers>[1,\n", ())),
        Example("zero-arg-call", f"{S}\n<function=now>\n</function>\n{E}", ParseResult("", (call("now", "{}"),))),
        Example("typing-integer", READ, ParseResult("", (call("read", '{"page": 1}'),)), tools=read_tools("integer")),
        Example("typing-string", READ, ParseResult("", (call("read", '{"page": "1"}'),)), tools=read_tools("string")),
        Example("reasoning-split", f"<seed:think>Maybe {S} later.</seed:think>\nOK.\n" + CALL_B, ParseResult("OK.\n", (B,), f"Maybe {S} later.")),
        Example("reasoning-open", "hm</seed:think>" + CALL_B, ParseResult("", (B,), "hm"), reasoning_open=True),
        Example("think-is-not-the-tag", "<think>x</think>y", ParseResult("<think>x</think>y", ())),
        Example(
            "multiline-value-one-newline-stripped", f"{S}\n<function=edit>\n<parameter=new>\ndef f():\n    pass\n\n</parameter>\n</function>\n{E}",
            ParseResult("", (call("edit", '{"new": "def f():\\n    pass\\n"}'),)),
        ),
    ),
    planted="<seed:think>plan</seed:think>\n" + CALL_A + "\n" + CALL_B,
    finish=CALL_A + "\n" + CALL_B[: -len(E)],
    finish_calls=True,
    long=(Long("parameters", f"{S}\n<function=f>\n" + (("<parameter=a>" + "x<" * 10 + "y" * 1000 + "</param") * 1000)[: 1 << 20]),),
    corpus=(Corpus("seed_oss.jsonl", 9, dict(skip={6: CONTINUE, 7: CONTINUE}, reasoning_open_rule=prompt_opened(P.THINK), tools_for=llama_tools), skipped=2),),
    public_bugs=("seed_oss",),
    extra=(tags_and_markers,),
)
