"""OpenTelemetry traces and GenAI log records (format ``otel``): OTLP JSON exports, one export per line or one document.

Input: what the OpenTelemetry Collector's file exporter writes (one ``ExportTraceServiceRequest`` or
``ExportLogsServiceRequest`` as JSON per line: ``resourceSpans[].scopeSpans[].spans[]`` /
``resourceLogs[].scopeLogs[].logRecords[]``, attributes as ``[{"key", "value": {"stringValue" |
"intValue" | "doubleValue" | "boolValue" | "arrayValue" | "kvlistValue"}}]``), a pretty-printed
export, or one span per line with a flat ``attributes`` object. A record is a span or a log
record, numbered by the line of its export (so a line may hold several records). Three
conventions are read, each from the writer's own output (``tests/data/captures/``, written by
``tests/writers/otel_writer.py``):

- **OpenTelemetry GenAI semantic conventions** (1.37 and later; ``opentelemetry-instrumentation-openai-v2``,
  and OpenLLMetry's current releases): ``gen_ai.input.messages`` (``[{role, parts: [{type: text,
  content} | {type: tool_call, id, name, arguments} | {type: tool_call_response, id, response}]}]``,
  JSON text on a span, structured on a log record), ``gen_ai.system_instructions``,
  ``gen_ai.tool.definitions`` (flat ``{type, name, description, parameters}``: converted to the
  Chat Completions ``{type, function: {...}}`` and ``tool_shape`` added to ``capture_lacks``;
  already nested definitions are kept), ``gen_ai.output.messages`` (same parts and
  ``finish_reason``; the conventions' ``tool_call`` is Chat Completions' ``tool_calls``), else
  ``gen_ai.response.finish_reasons``. The content may be on the span or, in the instrumentations'
  event mode, on a ``gen_ai.client.inference.operation.details`` log record (``eventName``), which
  carries the same attributes: such a record is an exchange of its own, and its span, which then
  holds no content, is skipped.
- **OpenLLMetry (traceloop) indexed attributes** (``opentelemetry-instrumentation-openai`` before
  its move to the conventions above): ``gen_ai.prompt.{i}.role`` / ``.content`` /
  ``.tool_call_id`` / ``.tool_calls.{j}.id,name,arguments``; ``llm.request.functions.{i}.name`` /
  ``.description`` / ``.parameters``; ``gen_ai.completion.{i}.content`` / ``.finish_reason`` /
  ``.tool_calls.{j}.*``; ``llm.is_streaming`` (``gen_ai.is_streaming`` in later releases) sets the
  request's ``stream``.
- **OpenInference** (``openinference-instrumentation-openai``; Arize Phoenix; Envoy AI Gateway):
  ``input.value`` with ``input.mime_type`` ``application/json`` is the request body as the client
  passed it (kept as is: no ``exact_request`` lack), ``output.value`` the response body (for a
  stream, the chunks assembled into one ``choices[].message``); without them, the request is
  rebuilt from ``llm.input_messages.{i}.message.{role, content, tool_call_id,
  tool_calls.{j}.tool_call.{id, function.name, function.arguments}}``, ``llm.tools.{i}.tool.json_schema``,
  ``llm.model_name`` and ``llm.invocation_parameters``, the answer from ``llm.output_messages.0``.

**Jaeger and Zipkin JSON** of the same spans (what their UIs download, and their query APIs return)
are converted to this attribute form first (:func:`jaeger_spans`, :func:`zipkin_span`): Jaeger's
``{"data": [{"traceID", "spans": [{"spanID", "operationName", "startTime" (µs), "tags": [{"key",
"type", "value"}]}]}]}`` (Jaeger's JSON model, ``model/json/model.go``; ``bool`` / ``int64`` /
``float64`` tags typed, as the collector's ``pkg/translator/jaeger`` writes OTLP attributes) and
Zipkin v2's span list ``[{"traceId", "id", "name", "timestamp" (µs), "tags": {key: string}}]``
(``pkg/translator/zipkin``: every attribute a string). Both write an array attribute as its JSON
text and Zipkin a boolean as ``"true"``/``"false"``: ``*.finish_reasons`` is decoded from JSON and
``*.is_streaming`` from ``"true"``/``"false"``; the other attributes this reader takes as JSON are
JSON text on spans already.

Common: model ``gen_ai.request.model`` (else ``gen_ai.response.model``, ``llm.model_name``); id
``gen_ai.response.id`` (else the span id); ts the span's ``startTimeUnixNano`` (a log record's
``timeUnixNano``, else ``observedTimeUnixNano``); ``gen_ai.provider.name`` / ``gen_ai.system`` /
``llm.system`` goes to the record's ``metadata``. The exchange is rebuilt in Chat Completions form
(route ``chat.completions``). What a record lacks, always: the raw completion (``raw_completion``)
and the chunks (``stream``: no writer keeps them); ``exact_request`` unless OpenInference's
``input.value`` was read; ``response`` when no output was recorded; ``tools`` when no tool
attribute was recorded (the conventions make tool definitions opt-in, and the official
instrumentation does not record them for Chat Completions: the request may have declared some).

Skipped, with the reason counted (:class:`replay.capture.records.Skip`), never an exchange: a span
with no ``gen_ai.*``, ``llm.*`` or OpenInference attribute; an operation that is not a model call
(``gen_ai.operation.name`` ``invoke_agent``, ``execute_tool``, ``embeddings``, ...; OpenLLMetry's
``llm.request.type`` ``embedding``; ``openinference.span.kind`` other than ``LLM``); a span with no
content at all (content capture off, content on log records, or vLLM's own ``llm_request`` spans,
which never hold any: ``vllm/tracing.py``); a log record that is not the operation-details event.
A wrong-shape attribute (an ``gen_ai.input.messages`` that is not an array of messages, a tool
definition that is not an object, an ``input.value`` declared JSON that is not) is an error row
(``bad-field``) naming the convention and the attribute.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from replay import exactjson
from replay.capture.records import Skip, Unit
from replay.capture.v1 import CaptureError, json_text

__all__ = ["DETAILS_EVENT", "attributes", "read_export", "records_from_export", "span_record"]

#: The log record (``eventName``) that carries one inference's content in the GenAI conventions' event mode.
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
#: ``gen_ai.operation.name`` values that are model calls (GenAI conventions' well-known values).
MODEL_CALLS = ("chat", "text_completion", "generate_content")
#: The conventions' ``finish_reason`` values that Chat Completions spells otherwise (``gen-ai-output-messages.json``).
FINISH_REASONS = {"tool_call": "tool_calls"}


def _value(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    for k in ("stringValue", "boolValue", "doubleValue"):
        if k in v:
            return v[k]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "arrayValue" in v:
        return [_value(x) for x in (v["arrayValue"] or {}).get("values", []) or []]
    if "kvlistValue" in v:
        return {kv.get("key"): _value(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values", []) or []}
    return None


def attributes(span: dict) -> dict[str, Any]:
    """A span's (or log record's) attributes as a flat dict: OTLP ``[{"key", "value": {...}}]``
    decoded (``intValue`` to int, ``arrayValue`` to a list, ``kvlistValue`` to a dict), or the
    ``attributes`` object as it is when already flat. Takes the span dict; returns a new dict."""
    attrs = span.get("attributes")
    if isinstance(attrs, dict):
        return attrs
    out: dict[str, Any] = {}
    for kv in attrs if isinstance(attrs, list) else ():
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = _value(kv.get("value"))
    return out


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return exactjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _json_attr(a: dict, key: str, want: type, what: str, name: str | None = None) -> Any:
    """Attribute ``key`` decoded from JSON text (or as it is when structured), None when absent;
    raises ``bad-field`` naming the attribute (``name``, default ``key``) when it is not a ``want``."""
    if key not in a or a[key] is None:
        return None
    v = _json(a[key])
    if not isinstance(v, want):
        shown = "text that is not JSON" if isinstance(v, str) else type(v).__name__
        raise CaptureError("bad-field", f"{name or key} must be {what}, got {shown}")
    return v


def _message_from_parts(msg: Any, key: str, i: int) -> dict:
    """A conventions message (role + parts) as a Chat Completions message; ``key``/``i`` name it in errors."""
    if not isinstance(msg, dict):
        raise CaptureError("bad-field", f"{key}[{i}] must be an object, got {type(msg).__name__}")
    role = msg.get("role")
    parts = msg.get("parts")
    if not isinstance(parts, list):
        raise CaptureError("bad-field", f"{key}[{i}].parts must be an array, got {type(parts).__name__}")
    texts, calls, out = [], [], {"role": role}
    for p in parts:
        if not isinstance(p, dict):
            raise CaptureError("bad-field", f"{key}[{i}].parts holds a {type(p).__name__}, not an object")
        if p.get("type") == "text" and isinstance(p.get("content"), str):
            texts.append(p["content"])
        elif p.get("type") == "tool_call":
            calls.append({"id": p.get("id"), "type": "function", "function": {"name": p.get("name"), "arguments": json_text(p.get("arguments"))}})
        elif p.get("type") == "tool_call_response":
            out = {"role": "tool", "tool_call_id": p.get("id")}
            texts.append(p.get("response") if isinstance(p.get("response"), str) else exactjson.dumps(p.get("response")).decode())
    text = "".join(texts)
    out["content"] = text if text or not calls else None  # an assistant call message: content null, as clients send it
    if calls:
        out["tool_calls"] = calls
    return out


def _indexed(attrs: dict, prefix: str) -> list[dict]:
    """``prefix.N.key`` attributes grouped as ``[{key: value}]`` by N (nested keys kept dotted)."""
    groups: dict[int, dict] = {}
    pat = re.compile(re.escape(prefix) + r"\.(\d+)\.(.+)$")
    for k, v in attrs.items():
        m = pat.match(k)
        if m:
            groups.setdefault(int(m.group(1)), {})[m.group(2)] = v
    return [groups[i] for i in sorted(groups)]


def _indexed_calls(group: dict, prefix: str, name: str, arguments: str) -> list[dict]:
    return [{"id": t.get(f"{prefix}id"), "type": "function", "function": {"name": t.get(name), "arguments": json_text(t.get(arguments))}}
            for t in _indexed(group, "tool_calls")]


def _indexed_message(g: dict) -> dict:
    """An OpenLLMetry ``gen_ai.prompt.{i}`` / ``gen_ai.completion.{i}`` group as a Chat Completions message."""
    msg: dict[str, Any] = {"role": g.get("role"), "content": g.get("content")}
    calls = _indexed_calls(g, "", "name", "arguments")
    if calls:
        msg["tool_calls"] = calls
    if g.get("tool_call_id") is not None:
        msg["tool_call_id"] = g["tool_call_id"]
    return msg


def _tools(a: dict, lacks: list[str]) -> list[dict] | None:
    """The request's tools from ``gen_ai.tool.definitions`` (flat ones converted) or ``llm.request.functions.{i}``."""
    defs = _json_attr(a, "gen_ai.tool.definitions", list, "a JSON array of tool definitions")
    if defs is not None:
        tools, flat = [], False
        for j, t in enumerate(defs):
            if not isinstance(t, dict):
                raise CaptureError("bad-field", f"gen_ai.tool.definitions[{j}] must be an object, got {type(t).__name__}")
            if isinstance(t.get("function"), dict):
                tools.append(t)
                continue
            if not isinstance(t.get("name"), str):
                raise CaptureError("bad-field", f"gen_ai.tool.definitions[{j}] has neither a 'function' object nor a 'name'")
            flat = True
            fn = {k: t[k] for k in ("name", "description", "parameters", "strict") if k in t}
            tools.append({"type": t.get("type") or "function", "function": fn})
        if flat:
            lacks.append("tool_shape")
        return tools
    fns = _indexed(a, "llm.request.functions")
    if not fns:
        return None
    tools = []
    for j, f in enumerate(fns):
        fn = {"name": f.get("name")}
        if "description" in f:
            fn["description"] = f["description"]
        if "parameters" in f:
            fn["parameters"] = _json_attr(f, "parameters", dict, "a JSON object", f"llm.request.functions.{j}.parameters")
            if fn["parameters"] is None:
                del fn["parameters"]
        tools.append({"type": "function", "function": fn})
    return tools


def _common(rec: dict, a: dict, item: dict, model: Any, ts_keys: tuple[str, ...]) -> dict:
    rid = a.get("gen_ai.response.id") or item.get("spanId")
    if isinstance(rid, str):
        rec["id"] = rid
    if isinstance(model, str):
        rec["model"] = model
    for key in ts_keys:
        ts = item.get(key)
        if isinstance(ts, (str, int)) and not isinstance(ts, bool) and str(ts) not in ("", "0"):
            try:
                rec["ts"] = int(ts) / 1e9
                break
            except ValueError:
                pass
    provider = a.get("gen_ai.provider.name") or a.get("gen_ai.system") or a.get("llm.system")
    if provider is not None:
        rec["metadata"] = {"provider": provider}
    return rec


def _genai_record(a: dict, item: dict, ts_keys: tuple[str, ...]) -> dict | Skip:
    """An exchange from GenAI-conventions or OpenLLMetry attributes ``a`` of a span or log record ``item``."""
    op = a.get("gen_ai.operation.name")
    if op is not None and op not in MODEL_CALLS:
        return Skip(f"otel: gen_ai.operation.name {str(op)[:60]} is not a model call")
    if a.get("llm.request.type") not in (None, "chat", "completion"):
        return Skip(f"otel: llm.request.type {str(a['llm.request.type'])[:60]} is not a model call")
    inputs = _json_attr(a, "gen_ai.input.messages", list, "a JSON array of messages")
    sys_ins = _json_attr(a, "gen_ai.system_instructions", list, "a JSON array of parts")
    outputs = _json_attr(a, "gen_ai.output.messages", list, "a JSON array of messages")
    prompts, completions = _indexed(a, "gen_ai.prompt"), _indexed(a, "gen_ai.completion")
    if inputs is None and sys_ins is None and outputs is None and not prompts and not completions:
        return Skip("otel: no content (no input or output message attributes: content capture off, "
                    "content on log records, or a server span such as vLLM's llm_request)")
    model = a.get("gen_ai.request.model") or a.get("gen_ai.response.model")
    lacks = ["exact_request", "raw_completion", "stream"]
    messages: list[dict] = []
    if sys_ins:
        text = "".join(p.get("content", "") for p in sys_ins if isinstance(p, dict) and isinstance(p.get("content"), str))
        messages.append({"role": "system", "content": text})
    if inputs is not None:
        messages += [_message_from_parts(m, "gen_ai.input.messages", i) for i, m in enumerate(inputs)]
    else:
        messages += [_indexed_message(g) for g in prompts]
    request: dict[str, Any] = {"model": model, "messages": messages}
    tools = _tools(a, lacks)
    if tools is None:
        lacks.append("tools")
    elif tools:
        request["tools"] = tools
    streaming = a.get("gen_ai.is_streaming", a.get("llm.is_streaming"))
    if streaming is True:
        request["stream"] = True

    finishes = a.get("gen_ai.response.finish_reasons")
    finish = finishes[0] if isinstance(finishes, list) and finishes else None
    message = None
    if outputs:
        message = _message_from_parts(outputs[0], "gen_ai.output.messages", 0)
        message["role"] = "assistant"
        if isinstance(outputs[0], dict) and outputs[0].get("finish_reason"):
            finish = outputs[0]["finish_reason"]
    elif completions:
        message = _indexed_message(completions[0])
        message["role"] = "assistant"
        finish = completions[0].get("finish_reason") or finish
    rec: dict[str, Any] = {"route": "chat.completions", "request": request, "capture_lacks": lacks}
    if message is not None:
        rec["response"] = {"object": "chat.completion", "model": a.get("gen_ai.response.model") or model,
                           "choices": [{"index": 0, "message": message, "finish_reason": FINISH_REASONS.get(finish, finish)}]}
    else:
        lacks.append("response")
    return _common(rec, a, item, model, ts_keys)


def _openinference_record(a: dict, span: dict) -> dict | Skip:
    """An exchange from OpenInference attributes ``a`` of ``span``."""
    kind = a.get("openinference.span.kind")
    if kind is not None and kind != "LLM":
        return Skip(f"otel: openinference.span.kind {str(kind)[:60]} is not a model call")
    lacks = ["raw_completion", "stream"]
    request = None
    if a.get("input.value") is not None and a.get("input.mime_type") == "application/json":
        request = _json_attr(a, "input.value", dict, "a JSON object (the request body: input.mime_type is application/json)")
    if request is None:
        msgs = _indexed(a, "llm.input_messages")
        if not msgs and a.get("output.value") is None and not _indexed(a, "llm.output_messages"):
            return Skip("otel: OpenInference span with no content (no input.value nor llm.input_messages)")
        lacks.insert(0, "exact_request")
        params = _json_attr(a, "llm.invocation_parameters", dict, "a JSON object")
        request = dict(params or {})
        request.setdefault("model", a.get("llm.model_name"))
        request["messages"] = [_oi_message(g) for g in msgs]
        tools = []
        for j, t in enumerate(_indexed(a, "llm.tools")):
            schema = _json(t.get("tool.json_schema"))
            if not isinstance(schema, dict):
                raise CaptureError("bad-field", f"llm.tools.{j}.tool.json_schema must be a JSON object, got {type(schema).__name__}")
            tools.append(schema)
        if tools:
            request["tools"] = tools
    model = request.get("model") or a.get("llm.model_name")
    rec: dict[str, Any] = {"route": "chat.completions", "request": request, "capture_lacks": lacks}
    response = None
    if a.get("output.value") is not None and a.get("output.mime_type") == "application/json":
        response = _json_attr(a, "output.value", dict, "a JSON object (the response body: output.mime_type is application/json)")
        if not isinstance(response.get("choices"), list):
            raise CaptureError("bad-field", "output.value has no 'choices' array")
        # a stream's output.value is its chunks assembled (object chat.completion.chunk, choices[].message)
        response = {**response, "object": "chat.completion"}
    else:
        outs = _indexed(a, "llm.output_messages")
        if outs:
            response = {"object": "chat.completion", "model": model,
                        "choices": [{"index": 0, "message": {**_oi_message(outs[0]), "role": "assistant"}, "finish_reason": a.get("llm.finish_reason")}]}
    if response is not None:
        rec["response"] = response
    else:
        lacks.append("response")
    _common(rec, a, span, model, ("startTimeUnixNano",))
    if response is not None and isinstance(response.get("id"), str):
        rec["id"] = response["id"]
    return rec


def _oi_message(g: dict) -> dict:
    """An OpenInference ``llm.*_messages.{i}`` group as a Chat Completions message."""
    msg: dict[str, Any] = {"role": g.get("message.role"), "content": g.get("message.content")}
    calls = [{"id": t.get("tool_call.id"), "type": "function",
              "function": {"name": t.get("tool_call.function.name"), "arguments": json_text(t.get("tool_call.function.arguments"))}}
             for t in _indexed(g, "message.tool_calls")]
    if calls:
        msg["tool_calls"] = calls
    if g.get("message.tool_call_id") is not None:
        msg["tool_call_id"] = g["message.tool_call_id"]
    return msg


def span_record(span: dict) -> dict | Skip:
    """The v1-form record of one span (mapping and skips: module docstring): a dict, or a
    :class:`Skip` with its reason. Raises :class:`CaptureError` (``bad-field``, naming the attribute) when an
    attribute holds the wrong shape."""
    a = attributes(span)
    if "openinference.span.kind" in a or "input.value" in a or any(k.startswith("llm.input_messages.") for k in a):
        return _openinference_record(a, span)
    if not any(k.startswith(("gen_ai.", "llm.")) for k in a):
        return Skip("otel: span with no gen_ai.*, llm.* or OpenInference attribute (not an LLM call)")
    return _genai_record(a, span, ("startTimeUnixNano",))


def log_record(rec: dict) -> dict | Skip:
    """The v1-form record of one OTLP log record: the exchange of a ``gen_ai.client.inference.operation.details``
    event (same attributes as a span: module docstring), else a :class:`Skip` (other events, such as
    the older per-message ``gen_ai.user.message`` / ``gen_ai.choice``, hold one message each).
    Raises as :func:`span_record`."""
    a = attributes(rec)
    name = rec.get("eventName") or a.get("event.name")
    if name != DETAILS_EVENT:
        return Skip(f"otel: log record {str(name)[:60]} is not the {DETAILS_EVENT} event")
    return _genai_record(a, rec, ("timeUnixNano", "observedTimeUnixNano"))


def _typed(key: str, value: Any) -> Any:
    """A Jaeger or Zipkin tag value back to the attribute's type where this reader needs it (module docstring)."""
    if isinstance(value, str):
        if key.endswith("finish_reasons") and value.startswith("["):
            return _json(value)
        if key.endswith("is_streaming") and value in ("true", "false"):
            return value == "true"
    return value


def _micros(value: Any) -> Any:
    return int(value) * 1000 if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def jaeger_spans(obj: dict) -> list[dict]:
    """The spans of a Jaeger JSON document (``{"data": [trace, ...]}``) in the attribute form
    :func:`span_record` reads (``spanId``, ``name``, ``startTimeUnixNano``, flat ``attributes``).
    Raises :class:`CaptureError` (``bad-field``) for a trace or span that is not an object, or
    ``tags`` that are not an array of ``{key, value}``."""
    out = []
    for t, trace in enumerate(obj["data"]):
        if not isinstance(trace, dict) or not isinstance(trace.get("spans", []), list):
            raise CaptureError("bad-field", f"jaeger data[{t}] must be a trace object with a 'spans' array")
        for i, sp in enumerate(trace.get("spans") or ()):
            tags = sp.get("tags") if isinstance(sp, dict) else None
            if not isinstance(tags, list) or not all(isinstance(kv, dict) and isinstance(kv.get("key"), str) for kv in tags):
                raise CaptureError("bad-field", f"jaeger data[{t}].spans[{i}].tags must be an array of {{key, type, value}} objects")
            out.append({"spanId": sp.get("spanID"), "name": sp.get("operationName"), "startTimeUnixNano": _micros(sp.get("startTime")),
                        "attributes": {kv["key"]: _typed(kv["key"], kv.get("value")) for kv in tags}})
    return out


def zipkin_span(obj: dict) -> dict:
    """One Zipkin v2 span in the attribute form :func:`span_record` reads. Raises
    :class:`CaptureError` (``bad-field``) when ``tags`` is not an object."""
    tags = obj.get("tags", {})
    if not isinstance(tags, dict):
        raise CaptureError("bad-field", f"zipkin span tags must be an object, got {type(tags).__name__}")
    return {"spanId": obj.get("id"), "name": obj.get("name"), "startTimeUnixNano": _micros(obj.get("timestamp")),
            "attributes": {k: _typed(k, v) for k, v in tags.items()}}


def _items(obj: dict, top: str, scope_key: str, legacy_scope_key: str, leaf: str) -> list[dict]:
    items: list[dict] = []
    if not isinstance(obj[top] or [], list):
        raise CaptureError("bad-field", f"{top} must be an array, got {type(obj[top]).__name__}")
    for r, rs in enumerate(obj[top] or ()):
        if not isinstance(rs, dict):
            raise CaptureError("bad-field", f"{top}[{r}] must be an object, got {type(rs).__name__}")
        scopes = rs.get(scope_key) or rs.get(legacy_scope_key) or []
        if not isinstance(scopes, list) or not all(isinstance(ss, dict) and isinstance(ss.get(leaf) or [], list) for ss in scopes):
            raise CaptureError("bad-field", f"{top}[{r}].{scope_key} must be an array of objects with a '{leaf}' array")
        for ss in scopes:
            items.extend(s for s in ss.get(leaf) or () if isinstance(s, dict))
    return items


def records_from_export(obj: dict) -> list[dict | Skip | CaptureError]:
    """The records of one OTLP export object (``resourceSpans`` or ``resourceLogs``) or one span:
    one item per span / log record, in order: its record, a :class:`Skip` for one that is not an
    exchange, or the :class:`CaptureError` of one that cannot
    be mapped (its detail names the span and the attribute), so the others still count. Raises
    :class:`CaptureError` (``bad-field``) for an object that is neither an export nor a span, or an
    export whose resource/scope/span arrays are not arrays of objects."""
    if "resourceLogs" in obj:
        items, mapper, noun = _items(obj, "resourceLogs", "scopeLogs", "instrumentationLibraryLogs", "logRecords"), log_record, "log record"
    elif "resourceSpans" in obj:
        items, mapper, noun = _items(obj, "resourceSpans", "scopeSpans", "instrumentationLibrarySpans", "spans"), span_record, "span"
    elif "attributes" in obj:
        items, mapper, noun = [obj], span_record, "span"
    elif isinstance(obj.get("data"), list):  # a Jaeger JSON document
        items, mapper, noun = jaeger_spans(obj), span_record, "jaeger span"
    elif "traceId" in obj and ("tags" in obj or "localEndpoint" in obj):  # one Zipkin v2 span
        items, mapper, noun = [zipkin_span(obj)], span_record, "zipkin span"
    else:  # neither an export nor a span: not OTel at all
        raise CaptureError("bad-field", "not an OTLP export (no 'resourceSpans' / 'resourceLogs'), a span (no 'attributes'), "
                                        f"a Jaeger document (no 'data' array) nor a Zipkin span (no 'traceId' with 'tags'); keys: {', '.join(list(obj)[:6])}")
    out: list[dict | Skip | CaptureError] = []
    for i, item in enumerate(items):
        try:
            out.append(mapper(item))
        except CaptureError as exc:
            label = item.get("name") or item.get("eventName")
            out.append(CaptureError(exc.reason, f"otel {noun} {i} ({label!r:.60}): {exc.detail}"))
    return out


def read_export(path: Path, on_read: Callable[[int], None] | None = None) -> Iterator[Unit]:
    """The units of an OTLP JSON file (:func:`replay.capture.jsonlines.read_json_lines` with
    :func:`records_from_export`); a line that is not JSON (a truncated export) is an error whose
    detail says it was read as an OTLP export."""
    from replay.capture.jsonlines import read_json_lines

    for unit in read_json_lines(path, records_from_export, on_read, arrays=True):  # a Zipkin span list is a JSON array
        if unit.error is not None and unit.error.reason == "bad-json":
            unit.error = CaptureError("bad-json", f"otel (OTLP JSON export): {unit.error.detail}")
        yield unit
