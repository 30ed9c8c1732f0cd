"""Llama 3.x JSON tool calls: ``{"name": ..., "parameters": {...}}`` objects, optionally after
``<|python_tag|>``, separated by ``;``."""

from __future__ import annotations

import json
import re

from hypothesis import strategies as st

from families.spec import Corpus, Example, Family, Feed, Long, Property, Syntax, call
from replay.parsers.base import CallDelta, ParseResult
from replay.parsers.llama3_json import EOM, EOT, PYTHON_TAG
from replay.parsers.llama3_json import Llama3JsonParser as P
from strategies import DUMP_STYLES, json_objects, names, prompt_opened, text_with, ws

MARKERS = [PYTHON_TAG, EOT, EOM, "<|python", "_tag|>", ";", "{", "["]


@st.composite
def call_object(draw):
    key = draw(st.sampled_from(["parameters", "parameters", "arguments"]))
    return {"name": draw(names), key: draw(json_objects(MARKERS))}


@st.composite
def call_item(draw):
    """One item: a call object, or a JSON array of call objects (SGLang), in some dump style."""
    if draw(st.integers(0, 4)) == 0:
        value = draw(st.lists(call_object(), min_size=1, max_size=2))
    else:
        value = draw(call_object())
    return json.dumps(value, **draw(st.sampled_from(DUMP_STYLES)))


malformed_item = st.one_of(
    text_with(MARKERS),
    st.sampled_from(
        [
            '{"name": 1, "parameters": {}}',
            '{"name": "f"}',
            '{"name": "f", "parameters": [1]}',
            "[]",
            "[1, 2]",
            '[{"name": "f", "parameters": {}}, 3]',
            '{"name": "f", "parameters": {}',
            '{"a": "<|python_tag|>{\\"name\\": \\"g\\""',
            'brave_search.call(query="x")',
            "123",
            "1.",
            '{"name": "f", "parameters": {"a": 1.}}',
            "-",
        ]
    ),
)
separators = st.sampled_from(["; ", ";", " ; ", "\n", "", ";\n", "; " + PYTHON_TAG])


@st.composite
def llama_outputs(draw):
    lead = draw(st.sampled_from(["none", "ws", "tag", "text"]))
    parts = []
    if lead == "ws":
        parts.append(draw(ws))
    elif lead == "tag":
        parts.append(draw(st.sampled_from(["", "Sure. ", "\n"])) + PYTHON_TAG + draw(ws))
    elif lead == "text":
        parts.append(draw(text_with(MARKERS)))
    for i in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        if i:
            parts.append(draw(st.one_of(separators, text_with(MARKERS))))
        parts.append(draw(st.one_of(call_item(), call_item(), malformed_item)))
    parts.append(draw(st.one_of(st.just(""), st.just(EOT), ws, text_with(MARKERS))))
    text = "".join(parts)
    if draw(st.integers(0, 3)) == 0 and text:
        text = text[: draw(st.integers(0, len(text)))]
    return text


A = '{"name": "get_weather", "parameters": {"city": "Tokyo", "unit": "celsius"}}'
B = '{"name": "get_time", "parameters": {"timezone": "Asia/Tokyo"}}'
CA, CB = call("get_weather", '{"city": "Tokyo", "unit": "celsius"}'), call("get_time", '{"timezone": "Asia/Tokyo"}')
AB = A + "; " + B
_C = len(A) - 3
MARKER_IN_STRING = '{"name": "f", "parameters": {"q": "<|python_tag|>{}; x"}}'


def _skip_reason(rec):
    ctx = rec.get("test_context") or {}
    if "continue_final_message" in (ctx.get("other") or []):
        return "prefill"
    if rec.get("expected_content") is not None and not rec.get("expected_calls") and rec["expected_content"].strip() != rec["text"].strip():
        return "prefill"  # e.g. the "?" record: a template-delta test whose expected text is the whole message
    if re.match(r"<\|python_tag\|>\w+\.call\(", rec["text"]):
        return "builtin"  # Llama 3.1 built-in tool syntax <|python_tag|>NAME.call(...): llama.cpp only
    return None


FAMILY = Family(
    cls=P,
    syntax=(Syntax(f'{PYTHON_TAG}{{"name": "f", "parameters": {{"a": ', "}}", f'{PYTHON_TAG}{{"name": "g", "parameters": {{}}}}'),),
    properties=(Property("outputs", llama_outputs(), base=100),),
    examples=(
        Example(
            "python-tag-split-across-two-deltas", "Let me look. <|python_tag|>" + A, ParseResult("Let me look. ", (CA,)),
            deltas=("Let me look. <|python", "_tag|>" + A), events=(Feed("Let me look. "), Feed(calls=(CallDelta(0, "get_weather", CA.arguments),)), Feed()),
        ),
        Example("several-calls-in-one-delta", PYTHON_TAG + AB, ParseResult("", (CA, CB)), streamed=((0, *CA.__dict__.values()), (1, *CB.__dict__.values()))),
        Example(
            "call-end-and-next-call-start-in-one-delta", AB, deltas=(AB[:_C], AB[_C : len(A) + 12], AB[len(A) + 12 :]),
            events=(None, Feed(calls=(CallDelta(0, "get_weather", CA.arguments),)), Feed(calls=(CallDelta(1, "get_time", CB.arguments),)), Feed()),  # sent at its closing brace
        ),
        Example(
            "call-completed-in-last-delta", A, deltas=(A[:-1], "}"),  # no end marker: a call ends at its closing brace
            events=(Feed(), Feed(calls=(CallDelta(0, "get_weather", CA.arguments),)), Feed()),
        ),
        Example(
            "trailing-whitespace-released-by-finish", A + "\n", ParseResult("\n", (CA,)),
            deltas=(A + "\n",), events=(Feed(calls=(CallDelta(0, "get_weather", CA.arguments),)), Feed("\n")),
        ),
        Example("call-cut-off-is-content", "<|python_tag|>" + A[:-10], ParseResult("<|python_tag|>" + A[:-10], ())),
        Example("zero-arg-call", '{"name": "now", "parameters": {}}', ParseResult("", (call("now", "{}"),))),
        Example(
            "values-are-json-typed-not-schema-typed", '{"name": "f", "parameters": {"n": "1", "s": 1}}', ParseResult("", (call("f", '{"n": "1", "s": 1}'),)),
            tools=[{"type": "function", "function": {"name": "f", "parameters": {"properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}}}],
        ),
        Example("not-a-call-object", '{"name": "f"} hi', ParseResult('{"name": "f"} hi', ())),
        Example("object-after-prose-is-prose", 'x {"name": "f", "parameters": {}}', ParseResult('x {"name": "f", "parameters": {}}', ())),
        Example("prose-resumes-after-a-call", A + "; oops", ParseResult("; oops", (CA,))),  # separator kept
        Example("tag-dropped-only-before-a-call", "<|python_tag|>print(1)", ParseResult("<|python_tag|>print(1)", ())),
        Example("array-of-calls", "[" + A + ", " + B + "]", ParseResult("", (CA, CB))),
        Example("newline-separated-objects", A + "\n" + B, ParseResult("", (CA, CB))),
        Example("marker-inside-a-string", MARKER_IN_STRING, ParseResult("", (call("f", '{"q": "<|python_tag|>{}; x"}'),))),
        Example("separator-at-the-end", A + ";", ParseResult(";", (CA,))),
        Example("end-token-removed", A + "<|eot_id|>", ParseResult("", (CA,))),
    ),
    planted=PYTHON_TAG + AB,
    finish=AB + "\n",  # finish() must release the whitespace held after the last call
    long=(
        Long("long-string", '{"name": "f", "parameters": {"a": "' + "x" * 1_000_000, None),
        Long("deep-nesting", PYTHON_TAG + "[" * 200_000 + "{" * 200_000, None),
    ),
    corpus=(Corpus("llama3_json.jsonl", 7, dict(skip=_skip_reason, reasoning_open_rule=prompt_opened(None, flag=False)), skipped=("builtin",) * 2 + ("prefill",) * 4),),
    public_bugs=("llama3_json",),
    public_bug_ids=("B22",),
)
