"""Render equivalence: the render stage's fast paths give what the full path gives.

- :func:`replay.prepare.vllm.plain_chat` / ``VllmPreparer.prepare_tools``: a request it accepts
  is one ``chat_messages`` prepares without raising, with the same tools;
- :func:`replay.stages.rows._decode_sharing_tools`: the request it decodes is ``orjson.loads`` of
  the body, whatever the body holds (nested members of the same text, duplicate keys, spacing);
- the render stage writes the same rows with both shortcuts and without them.
"""

from __future__ import annotations

import copy
import json

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.stages import render as P, rows as R
from replay.prepare.base import PrepareError
from replay.prepare.vllm import NotBuilt, VllmPreparer, chat_messages, plain_chat
from replay.runspec import RunSpec, build_config

TOOLS = [
    {"type": "function", "function": {"name": f"tool_{i}", "description": "d" * 40, "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}
    for i in range(6)
]

_scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=6))
_part = st.one_of(
    st.text(max_size=5),
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "thinking", "refusal", "bogus"])}, optional={"text": _scalar, "thinking": _scalar}),
    st.integers(),
)
_args = st.one_of(
    st.sampled_from(['{"a": 1}', "", "not json", "[1, 2]", "1" * 4400, "[" * 1200 + "]" * 1200, "[" * 1000 + "]" * 1000, '{"a": NaN}', '"\\ud800"']),
    st.dictionaries(st.text(max_size=3), _scalar, max_size=2),
    _scalar,
)
_call = st.one_of(
    st.fixed_dictionaries({"id": _scalar, "type": st.just("function"), "function": st.fixed_dictionaries({"name": _scalar, "arguments": _args})}),
    st.fixed_dictionaries({"function": _scalar}),
    _scalar,
)
_message = st.fixed_dictionaries(
    {"role": st.one_of(st.sampled_from(["user", "assistant", "tool", "system", "developer"]), st.integers())},
    optional={
        "content": st.one_of(_scalar, st.lists(_part, max_size=3), st.dictionaries(st.text(max_size=2), _scalar, max_size=1)),
        "tool_calls": st.one_of(st.none(), st.lists(_call, max_size=2), _scalar),
        "name": _scalar,
        "tools": st.none(),
    },
)
_messages = st.one_of(st.lists(st.one_of(_message, _scalar), max_size=4), _scalar)


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - the outcome compared is the exception itself
        return ("raised", type(exc).__name__, str(exc))


@settings(max_examples=400, deadline=None)
@given(_messages, st.sampled_from(["string", "openai"]))
def test_a_request_plain_chat_accepts_is_prepared_without_raising(messages, fmt):
    if plain_chat(messages):
        chat_messages(copy.deepcopy(messages), fmt)  # must not raise


@settings(max_examples=300, deadline=None)
@given(_messages, st.sampled_from(["string", "openai"]), st.sampled_from(["chat.completions", "responses", "messages", None]))
def test_prepare_tools_has_prepares_outcome_and_tools(messages, fmt, route):
    request = {"messages": messages, "tools": TOOLS}
    p = VllmPreparer()
    quick = p.prepare_tools(route, request, fmt)
    full = _outcome(p.prepare, route, request, fmt)
    if quick is None:
        return
    assert full[0] == "ok", full
    assert full[1].tools == quick.tools and full[1].flat_tools_retry == quick.flat_tools_retry


def test_plain_chat_turns_down_what_it_cannot_promise():
    deep = {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[" * 1200 + "]" * 1200}}]}
    big = {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "1" * 4400}}]}
    # orjson reads 1,000 levels; whether json.loads does depends on the recursion limit and the
    # stack in use (RecursionError at the default limit from a shallow stack): never promised
    thousand = {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[" * 1000 + "]" * 1000}}]}
    assert not plain_chat([thousand])
    nested = {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": {"b": 1}}}}]}
    assert not plain_chat([deep]) and not plain_chat([big]) and not plain_chat([nested])
    with pytest.raises(ValueError):  # what the full path does with the 4,400-digit integer
        chat_messages([big], "string")
    assert not plain_chat([{"role": "developer", "content": "x", "tools": []}])
    assert not plain_chat([{"role": "user", "content": [{"type": "text", "text": 3}]}])
    with pytest.raises(TypeError):
        chat_messages([{"role": "user", "content": [{"type": "text", "text": 3}]}], "string")
    assert not plain_chat([{"role": "user", "content": [{"type": "bogus"}]}])
    with pytest.raises(PrepareError):
        chat_messages([{"role": "user", "content": [{"type": "bogus"}]}], "string")
    ok = [{"role": "system", "content": "s"}, {"role": "assistant", "content": None,
          "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
          {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "r"}]}]
    assert plain_chat(ok)


def test_not_built_messages_fail_loudly():
    with pytest.raises(RuntimeError):
        list(NotBuilt())
    with pytest.raises(RuntimeError):
        len(NotBuilt())


def test_a_subclass_with_its_own_prepare_is_never_short_cut():
    class Mine(VllmPreparer):
        def prepare(self, route, request, content_format="string"):
            raise PrepareError("mine")

    assert Mine().prepare_tools("chat.completions", {"messages": [{"role": "user", "content": "x"}]}) is None


def _tools_text(tools):
    return orjson.dumps(tools).decode()


def _bodies():
    t = _tools_text(TOOLS)
    other = _tools_text(TOOLS[:2])
    msgs = [{"role": "user", "content": "hello \"tools\": " + t}]
    yield orjson.dumps({"model": "m", "messages": msgs, "tools": TOOLS}), t  # the usual body (the text also inside a string)
    yield orjson.dumps({"tools": TOOLS, "model": "m"}), t  # first member
    # the same text as a nested member before the top-level one: the top-level stays as decoded
    yield orjson.dumps({"messages": [{"role": "developer", "tools": TOOLS}], "tools": TOOLS}), t
    # a key ending in an escaped quote + tools
    yield orjson.dumps({'x"tools': TOOLS, "tools": TOOLS}), t
    # duplicate keys: orjson keeps the last
    yield b'{"tools":' + t.encode() + b',"tools":' + other.encode() + b"}", other
    yield b'{"tools":' + other.encode() + b',"tools":' + t.encode() + b"}", t
    yield b'{"tools":' + t.encode() + b',"tools":null}', t
    yield b'{"tools": ' + t.encode() + b"}", t  # spaced: not orjson's form
    yield b'{"tools":' + t.encode() + b',"oops"', t  # not JSON
    yield orjson.dumps({"tools": None}), t  # the row's text is not the request's
    yield orjson.dumps([{"tools": TOOLS}]), t  # not an object


@pytest.mark.parametrize("body,text", list(_bodies()))
def test_decode_sharing_tools_is_orjson_loads_of_the_body(body, text):
    try:
        want = ("ok", orjson.loads(body))
    except orjson.JSONDecodeError:
        want = ("raised",)
    try:
        got = R._decode_sharing_tools(memoryview(body), text)
    except orjson.JSONDecodeError:
        got = "raised"
    if got is None:  # the caller decodes the whole body
        return
    assert got != "raised" and want[0] == "ok" and got == want[1]
    assert list(got) == list(want[1])  # key order too


def test_decode_sharing_tools_shares_the_list_and_is_used_for_the_usual_body():
    body, text = next(_bodies())
    a, b = R._decode_sharing_tools(body, text), R._decode_sharing_tools(bytes(body), text)
    assert a is not None and a == orjson.loads(body) and a["tools"] is b["tools"]


def _batch(bodies_and_texts):
    rows = [{"exchange_id": f"x{i}", "route": "chat.completions", "model": "Qwen/Qwen3-8B", "request_json": b.decode(),
             "tools_json": t, "server_prompt": None, "server_prompt_token_ids": None} for i, (b, t) in enumerate(bodies_and_texts)]
    schema = pa.schema([("exchange_id", pa.string()), ("route", pa.string()), ("model", pa.string()), ("request_json", pa.string()),
                        ("tools_json", pa.string()), ("server_prompt", pa.string()), ("server_prompt_token_ids", pa.list_(pa.int32()))])
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def test_render_rows_are_the_same_with_and_without_the_shortcuts(monkeypatch):
    t = _tools_text(TOOLS)
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None,
              "tool_calls": [{"id": "c", "type": "function", "function": {"name": "tool_1", "arguments": '{"x": "1"}'}}]}]
    bad = [{"role": "user", "content": [{"type": "bogus"}]}]
    items = [(orjson.dumps({"messages": m, "tools": TOOLS}), t) for m in (plain, bad, plain, [{"role": 3}])] + list(_bodies())
    batch = _batch([(b, tx) for b, tx in items if b.startswith(b"{")])
    cfg = build_config(RunSpec())
    fast = P.render_batch(batch, cfg)["renders"].to_pylist()
    monkeypatch.setattr(P, "shares_tools", lambda cfg: False)
    monkeypatch.setattr(VllmPreparer, "prepare_tools", lambda self, *a: None)
    slow = P.render_batch(batch, build_config(RunSpec()))["renders"].to_pylist()
    assert fast == slow
    assert any(r.get("error") for r in slow) and any(not r.get("error") for r in slow)
