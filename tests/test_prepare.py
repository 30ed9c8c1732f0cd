"""Request preparers (replay/prepare): each server's rules, checked value by value."""

from __future__ import annotations

import json

import pytest

from replay.prepare import PREPARERS, PrepareError, UnknownPreparerError, get_preparer
from replay.prepare.content_format import sglang_content_format, vllm_content_format

CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"city": "Paris"}'}}


def chat(*messages, tools=None):
    body = {"messages": list(messages)}
    if tools is not None:
        body["tools"] = tools
    return body


def assistant(args, content=None):
    return {"role": "assistant", "content": content, "tool_calls": [{**CALL, "function": {"name": "lookup", "arguments": args}}]}


def prep(name, body, route="chat.completions", fmt="string"):
    return get_preparer(name).prepare(route, body, fmt)


def test_vllm_null_content_and_string_arguments():
    got = prep("vllm", chat({"role": "user", "content": "hi"}, assistant('{"city": "Paris"}'), {"role": "tool", "tool_call_id": "call_1", "content": "ok", "extra": 1}))
    assert got.messages == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [{**CALL, "function": {"name": "lookup", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "ok", "tool_call_id": "call_1"},
    ]
    # openai content format: parts, null content -> []
    got = prep("vllm", chat({"role": "user", "content": "hi"}, assistant("{}")), fmt="openai")
    assert got.messages[0]["content"] == [{"type": "text", "text": "hi"}] and got.messages[1]["content"] == []


@pytest.mark.parametrize("args,want", [("", {}), ("not json", {}), (None, {}), ("[1, 2]", [1, 2]), ({"a": 1}, {"a": 1})])
def test_vllm_arguments_rule(args, want):
    got = prep("vllm", chat(assistant(args)))
    assert got.messages[0]["tool_calls"][0]["function"]["arguments"] == want


def test_vllm_drops_empty_tool_calls_and_joins_text_parts_with_newline():
    body = chat({"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "tool_calls": []})
    assert prep("vllm", body).messages == [{"role": "assistant", "content": "a\nb"}]


def test_sglang_rejects_arguments_that_are_not_a_json_object():
    with pytest.raises(PrepareError, match="must be valid JSON"):
        prep("sglang", chat(assistant("not json")))
    with pytest.raises(PrepareError, match="must be a JSON object"):
        prep("sglang", chat(assistant("[1]")))
    got = prep("sglang", chat(assistant('{"city": "Paris"}'), {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}))
    assert got.messages[0]["content"] == "" and got.messages[0]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    assert got.messages[1]["content"] == "a b"  # SGLang joins text parts with a space
    tool_parts = {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    assert prep("sglang", chat(tool_parts), fmt="openai").messages == [{"role": "tool", "tool_call_id": "c", "content": "a b"}]
    assert prep("sglang", chat({"role": "user", "content": [{"type": "text", "text": "a"}]}), fmt="openai").messages[0]["content"] == [{"type": "text", "text": "a"}]
    assert got.flat_tools_retry


def test_trtllm_keeps_unparseable_arguments_and_drops_name():
    got = prep("trtllm", chat({"role": "user", "content": "x", "name": "bob"}, assistant("not json"), assistant(None)))
    assert got.messages[0] == {"role": "user", "content": "x", "media": []}
    assert got.messages[1]["tool_calls"][0]["function"]["arguments"] == "not json"
    assert got.messages[2]["tool_calls"][0]["function"]["arguments"] == {}
    with pytest.raises(PrepareError, match=r"tool_calls\[0\].function.arguments must be a JSON object"):
        prep("trtllm", chat(assistant("[1]")))


def test_as_sent_leaves_the_request_alone():
    body = chat(assistant('{"city": "Paris"}'))
    got = prep("as-sent", body)
    assert got.messages == body["messages"] and got.messages is not body["messages"]


ANTHROPIC = {
    "system": [{"type": "text", "text": "Be brief."}],
    "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "Paris?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]}]},
    ],
}


def test_anthropic_conversion_vllm_and_sglang_differ():
    v = prep("vllm", ANTHROPIC, route="messages")
    s = prep("sglang", ANTHROPIC, route="messages")
    assert v.messages[0] == {"role": "system", "content": "Be brief."}
    assert v.messages[2]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": {"city": "Paris"}}
    # vLLM reads the block's `id` (absent: "") and prints the block list with str()
    assert v.messages[3] == {"role": "tool", "content": "[{'type': 'text', 'text': 'sunny'}]", "tool_call_id": ""}
    assert s.messages[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}
    # tools: vLLM writes a missing description as None, SGLang as ""
    assert v.tools == [{"type": "function", "function": {"name": "lookup", "description": None, "parameters": {"type": "object"}}}]
    assert s.tools == [{"type": "function", "function": {"name": "lookup", "description": "", "parameters": {"type": "object"}}}]


def test_responses_items_become_chat_messages():
    body = {"instructions": "sys", "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}],
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "Paris?"}]},
                      {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"city": "Paris"}'},
                      {"type": "function_call_output", "call_id": "c1", "output": "sunny"}]}
    got = prep("vllm", body, route="responses")
    assert got.messages == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {"name": "lookup", "arguments": {"city": "Paris"}}, "type": "function"}]},
        {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
    ]
    assert got.tools == [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def test_content_format_detection():
    loops = "{% for message in messages %}{% for part in message['content'] %}{{ part.text }}{% endfor %}{% endfor %}"
    plain = "{% for message in messages %}{{ message.content }}{% endfor %}"
    assert vllm_content_format(loops) == "openai" and vllm_content_format(plain) == "string"
    assert sglang_content_format(loops) == "openai" and sglang_content_format(plain) == "string"
    # SGLang's shortcut: any mention of image/audio/video/vision; vLLM looks at the syntax only
    assert sglang_content_format(plain + "{# image #}") == "openai" and vllm_content_format(plain + "{# image #}") == "string"
    # vLLM follows the loop variable's name; SGLang only knows message/msg/m
    other = "{% for turn in messages %}{% for p in turn.content %}{{ p }}{% endfor %}{% endfor %}"
    assert vllm_content_format(other) == "openai" and sglang_content_format(other) == "string"


def test_plugins_and_unknown_names(tmp_path):
    plugin = tmp_path / "prep.py"
    plugin.write_text("def upper(route, request):\n    return [{'role': m['role'], 'content': m['content'].upper()} for m in request['messages']]\n")
    got = get_preparer(f"{plugin}:upper").prepare("chat.completions", chat({"role": "user", "content": "hi"}))
    assert got.messages == [{"role": "user", "content": "HI"}]
    with pytest.raises(UnknownPreparerError, match="vllm, sglang, trtllm, as-sent"):
        get_preparer("tgi")
    assert set(PREPARERS) == {"vllm", "sglang", "trtllm", "as-sent"}
    assert json.loads(json.dumps(get_preparer(None).prepare("chat.completions", chat({"role": "user", "content": None})).messages)) == [{"role": "user", "content": ""}]


def test_templates_get_the_special_tokens_apply_chat_template_passes(tmp_path):
    """bos_token/eos_token: from the tokenizer's config, else the template file's, else the family's."""
    from replay.render.chat_template import template_special_tokens
    from replay.render.options import template_renderer

    llama = "{{ bos_token }}<|start_header_id|>user<|end_header_id|>{{ messages[0].content }}{{ eos_token }}"
    jinja = tmp_path / "t.jinja"
    jinja.write_text(llama)
    assert template_special_tokens(jinja, llama, None) == ({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, "family")
    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer_config.json").write_text(json.dumps({"bos_token": {"content": "<B>"}, "eos_token": "<E>"}))
    assert template_special_tokens(jinja, llama, tok) == ({"bos_token": "<B>", "eos_token": "<E>"}, "tokenizer")
    cfg = tmp_path / "tokenizer_config.json"
    cfg.write_text(json.dumps({"chat_template": llama, "bos_token": "<s>"}))
    assert template_special_tokens(cfg, llama, None) == ({"bos_token": "<s>"}, "template-file")
    assert template_special_tokens(jinja, "{{ messages }}", None) == ({}, "none")
    r = template_renderer(jinja, None, None)
    assert r.render([{"role": "user", "content": "hi"}], None).startswith("<|begin_of_text|><|start_header_id|>user")
    assert r.special_tokens_source == "family"
