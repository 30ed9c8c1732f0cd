"""OpenTelemetry GenAI spans (format ``otel``): OTLP JSON exports, one export per line or one document.

Input: what the OpenTelemetry Collector's file exporter writes (one ``ExportTraceServiceRequest`` as
JSON per line: ``resourceSpans[].scopeSpans[].spans[]``, attributes as ``[{"key", "value":
{"stringValue" | "intValue" | "doubleValue" | "boolValue" | "arrayValue"}}]``), a pretty-printed
export, or one span per line with a flat ``attributes`` object. A record is a span, numbered by the
line of its export; spans without any ``gen_ai.*`` attribute are skipped (counted in ``skipped``),
so the accounting is per span (an export line with no span at all is one skipped record).

Attributes read (OpenTelemetry semantic conventions for generative AI spans, v1.37+, and the
indexed attributes older instrumentations such as OpenLLMetry write):

- model: ``gen_ai.request.model`` (else ``gen_ai.response.model``); id: ``gen_ai.response.id``
  (else the span id); ts: ``startTimeUnixNano``;
- messages: ``gen_ai.input.messages`` (JSON: ``[{role, parts: [{type: text, content} |
  {type: tool_call, id, name, arguments} | {type: tool_call_response, id, response}]}]``) and
  ``gen_ai.system_instructions``, else ``gen_ai.prompt.N.role`` / ``.content``;
- tools: ``gen_ai.tool.definitions`` (JSON array), else ``llm.request.functions.N.name`` /
  ``.description`` / ``.parameters``;
- the answer: ``gen_ai.output.messages`` (same parts, and ``finish_reason``), else
  ``gen_ai.completion.0.content`` / ``.finish_reason`` / ``.tool_calls.N.{id,name,arguments}``;
  ``gen_ai.response.finish_reasons`` when the message has none.

The request and the response are rebuilt in Chat Completions form (route ``chat.completions``,
whatever the provider: ``gen_ai.provider.name`` / ``gen_ai.system`` goes to the record's
``metadata``). What a span lacks, always: the exact request body (``exact_request``: it is rebuilt
from attributes), the raw completion (``raw_completion``: nothing to re-stream) and the chunks
(``stream``); ``response`` too when no output attribute was recorded (content capture is off by
default in most instrumentations).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from replay import exactjson
from replay.capture.v1 import CaptureError, json_text

__all__ = ["attributes", "records_from_export", "span_record"]


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
    """A span's attributes as a flat dict: OTLP ``[{"key", "value": {...}}]`` or already flat."""
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


def _message_from_parts(msg: dict) -> dict:
    """A semconv message (role + parts) as a Chat Completions message."""
    role = msg.get("role")
    parts = msg.get("parts") if isinstance(msg.get("parts"), list) else []
    texts, calls, out = [], [], {"role": role}
    for p in parts:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "text" and isinstance(p.get("content"), str):
            texts.append(p["content"])
        elif p.get("type") == "tool_call":
            calls.append({"id": p.get("id"), "type": "function", "function": {"name": p.get("name"), "arguments": json_text(p.get("arguments"))}})
        elif p.get("type") == "tool_call_response":
            out = {"role": "tool", "tool_call_id": p.get("id")}
            texts.append(p.get("response") if isinstance(p.get("response"), str) else exactjson.dumps(p.get("response")).decode())
    out["content"] = "".join(texts) if texts else None
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


def span_record(span: dict) -> dict | None:
    """The v1-form record of one span, or None when it has no ``gen_ai.*`` attribute (mapping:
    module docstring). Raises :class:`CaptureError` (``bad-field``) when a JSON attribute holds the
    wrong type."""
    a = attributes(span)
    if not any(k.startswith("gen_ai.") for k in a):
        return None
    model = a.get("gen_ai.request.model") or a.get("gen_ai.response.model")
    messages: list[dict] = []
    sys_ins = _json(a.get("gen_ai.system_instructions"))
    if isinstance(sys_ins, list):
        text = "".join(p.get("content", "") for p in sys_ins if isinstance(p, dict) and isinstance(p.get("content"), str))
        messages.append({"role": "system", "content": text})
    inputs = _json(a.get("gen_ai.input.messages"))
    if inputs is not None:
        if not isinstance(inputs, list):
            raise CaptureError("bad-field", "gen_ai.input.messages must be a JSON array")
        messages += [_message_from_parts(m) for m in inputs if isinstance(m, dict)]
    else:
        messages += [{"role": g.get("role"), "content": g.get("content")} for g in _indexed(a, "gen_ai.prompt")]
    tools = _json(a.get("gen_ai.tool.definitions"))
    if tools is not None and not isinstance(tools, list):
        raise CaptureError("bad-field", "gen_ai.tool.definitions must be a JSON array")
    if tools is None:
        fns = _indexed(a, "llm.request.functions")
        if fns:
            tools = []
            for f in fns:
                fn = {"name": f.get("name")}
                if "description" in f:
                    fn["description"] = f["description"]
                if "parameters" in f:
                    fn["parameters"] = _json(f["parameters"])
                tools.append({"type": "function", "function": fn})
    request: dict[str, Any] = {"model": model, "messages": messages}
    if tools:
        request["tools"] = tools

    lacks = ["exact_request", "raw_completion", "stream"]
    finishes = a.get("gen_ai.response.finish_reasons")
    finish = finishes[0] if isinstance(finishes, list) and finishes else None
    message = None
    outputs = _json(a.get("gen_ai.output.messages"))
    if isinstance(outputs, list) and outputs and isinstance(outputs[0], dict):
        message = _message_from_parts(outputs[0])
        message["role"] = "assistant"
        finish = outputs[0].get("finish_reason") or finish
    else:
        comp = _indexed(a, "gen_ai.completion")
        if comp:
            c = comp[0]
            message = {"role": "assistant", "content": c.get("content")}
            calls = _indexed(c, "tool_calls")
            if calls:
                message["tool_calls"] = [
                    {"id": t.get("id"), "type": "function", "function": {"name": t.get("name"), "arguments": json_text(t.get("arguments"))}}
                    for t in calls
                ]
            finish = c.get("finish_reason") or finish
    rec: dict[str, Any] = {"route": "chat.completions", "request": request, "capture_lacks": lacks}
    if message is not None:
        rec["response"] = {"object": "chat.completion", "model": a.get("gen_ai.response.model") or model,
                           "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    else:
        lacks.append("response")
    rid = a.get("gen_ai.response.id") or span.get("spanId")
    if isinstance(rid, str):
        rec["id"] = rid
    if isinstance(model, str):
        rec["model"] = model
    ts = span.get("startTimeUnixNano")
    if isinstance(ts, (str, int)) and not isinstance(ts, bool):
        try:
            rec["ts"] = int(ts) / 1e9
        except ValueError:
            pass
    provider = a.get("gen_ai.provider.name") or a.get("gen_ai.system")
    if provider is not None:
        rec["metadata"] = {"provider": provider}
    return rec


def records_from_export(obj: dict) -> list[dict | CaptureError]:
    """The records of one OTLP export object (``resourceSpans``) or one span: one item per span, in
    order: its record, None for a span without ``gen_ai.*`` attributes (skipped), or the
    :class:`CaptureError` of a span that cannot be mapped, so the other spans still count. Raises
    :class:`CaptureError` (``bad-field``) for an object that is neither an export nor a span, or
    an export whose ``resourceSpans``/``scopeSpans``/``spans`` are not arrays of objects."""
    if "resourceSpans" not in obj:
        if "attributes" not in obj:  # neither an export nor a span: not OTel at all
            raise CaptureError("bad-field", f"not an OTLP export (no 'resourceSpans') nor a span (no 'attributes'); keys: {', '.join(list(obj)[:6])}")
        spans = [obj]
    else:
        spans = []
        if not isinstance(obj["resourceSpans"] or [], list):
            raise CaptureError("bad-field", f"resourceSpans must be an array, got {type(obj['resourceSpans']).__name__}")
        for r, rs in enumerate(obj["resourceSpans"] or ()):
            if not isinstance(rs, dict):
                raise CaptureError("bad-field", f"resourceSpans[{r}] must be an object, got {type(rs).__name__}")
            scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
            if not isinstance(scopes, list) or not all(isinstance(ss, dict) and isinstance(ss.get("spans") or [], list) for ss in scopes):
                raise CaptureError("bad-field", f"resourceSpans[{r}].scopeSpans must be an array of objects with a 'spans' array")
            for ss in scopes:
                spans.extend(s for s in ss.get("spans") or () if isinstance(s, dict))
    out: list[dict | CaptureError] = []
    for i, span in enumerate(spans):
        try:
            rec = span_record(span)
        except CaptureError as exc:
            out.append(CaptureError(exc.reason, f"span {i} ({span.get('name')!r:.40}): {exc.detail}"))
            continue
        out.append(rec)  # None: a span without gen_ai.* attributes, counted as skipped
    return out
