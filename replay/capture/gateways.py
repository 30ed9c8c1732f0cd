"""Gateway logs with the bodies as the gateway held them: Kong AI Gateway's file log (format ``kong``)
and Helicone's export (format ``helicone``), one JSON object per line (or one JSON array document).

**Kong AI Gateway** (``file-log`` / ``http-log`` plugins with the AI Proxy plugin's
``logging.log_payloads`` and ``log_statistics`` on). Each line is ``kong.log.serialize()`` of one
request: ``request`` (``method``, ``uri``, ``url``, ``headers``, ``id``), ``response`` (``status``),
``route`` (the Kong route object: ``name``, ``paths``), ``service``, ``started_at`` (epoch ms),
``upstream_uri``, and ``ai``: ``ai.<namespace>.payload.request`` (``ngx.req.get_body_data()``: the
raw request body as a string), ``ai.<namespace>.payload.response`` (the response body string; the SSE
text when streamed), ``ai.<namespace>.meta`` (``request_model``, ``response_model``,
``provider_name``) and ``.usage`` (Kong ``kong/llm/plugin/shared-filters/serialize-analytics.lua``,
namespace ``proxy`` for AI Proxy and AI Proxy Advanced; Kong 3.6 and 3.7 wrote the request under
``ai.payload.request``, also read). ``ngx.req.get_body_data()`` in the log phase is the body Kong
sent upstream: AI Proxy's ``normalize-request`` filter (``kong.service.request.set_body``) replaces
the client's body with its transform (the plugin's model and ``model.options`` merged in, re-encoded
by cjson) unless the route's ``route_type`` is ``preserve``: what the serving front end received,
which is what a render check needs. Mapping: the request is that payload parsed (no
``exact_request`` lack: it is a body as sent, not rebuilt from fields); the route from the request path (``/chat/completions``,
``/messages``, ``/responses``; else ``chat.completions``); a response that starts with an SSE field is
split into its ``data:`` payloads and kept as the exchange's stream (the chunks as served), else it is
the JSON response body. A streamed request's response is not what was served: AI Proxy logs a
composite it builds from the frames (``normalize-sse-chunk.lua``: the deltas' ``content`` joined and
the last ``finish_reason``, tool calls left out), so it is not read (``stream`` and ``response``
lacking: no served-side checks, which would see a ``tool_calls`` finish without its calls); id
``request.id``; ts ``started_at``; model ``meta.request_model`` when the body names none. Lacks,
always: ``raw_completion``.

Skipped (counted, with the reason): an entry of a route without an AI plugin (``request`` and
``started_at`` but no ``ai``); an AI entry without payloads (``log_payloads`` off). An object with
neither Kong's ``ai`` nor its serializer keys is a ``bad-field`` error naming the keys expected and
found (a file forced as ``--capture-format kong`` that is not a Kong log); a payload that is not JSON
is ``bad-json`` naming the field.

**Helicone** (``@helicone/export``: ``npx @helicone/export --include-body --format jsonl``; the
records of ``POST /v1/request/query-clickhouse`` with ``request_body`` / ``response_body`` filled
from each record's signed body). Per record: ``request_id``, ``request_created_at``,
``request_path``, ``request_body`` (the body as sent), ``response_body``, ``response_status``,
``model``, ``provider``, token counts and cost. A streamed response is stored consolidated into its
first chunk by Helicone's ``consolidateTextFields`` (``valhalla/jawn/src/utils/streamParser.ts``,
called by ``lib/shared/bodyProcessors/openAIStreamProcessor.ts``): ``choices[{delta, message}]`` with
the deltas' content and tool-call arguments joined by call index and no ``finish_reason``; it is read
as a response whose message is ``choices[].message`` (``finish_reason`` null), and the exchange lacks
``stream`` (no chunks) and ``raw_completion``. The body processor keeps the chunks beside it as
``streamed_data``, which the export tool filters out; where a record still holds them (a list of
chunk objects), they are read as the exchange's stream instead (the chunks as served). A record without ``request_body`` (exported without ``--include-body``) lacks
``request``; without ``response_body``, ``response``. An object without Helicone's keys is a
``bad-field`` error naming the keys expected and found.
"""

from __future__ import annotations

from typing import Any

import orjson

from replay.capture.har import route_of_url
from replay.capture.records import Skip
from replay.capture.v1 import CaptureError

__all__ = ["HELICONE_KEYS", "KONG_KEYS", "helicone_record", "kong_record", "sse_payloads"]

#: The keys of Kong's log serializer that mark an entry of its file log (``kong.log.serialize``).
KONG_KEYS = ("started_at", "request", "response", "route", "service", "upstream_uri", "latencies")
#: The keys of a Helicone export record, of which a record has ``request_id`` and one of the others.
HELICONE_KEYS = ("request_body", "response_body", "request_path", "response_status", "request_created_at")


def _keys(obj: dict) -> str:
    return ", ".join(list(obj)[:8]) or "none"


def sse_payloads(text: str) -> list[str]:
    """The ``data:`` payloads of an SSE text (one string per event, its ``data:`` lines joined by
    newlines, as the SSE spec joins them), ``[DONE]`` included. Takes the text; returns strings."""
    out: list[str] = []
    cur: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line.strip():
            if cur:
                out.append("\n".join(cur))
                cur = []
        elif line.startswith("data:"):
            cur.append(line[5:].lstrip(" "))
    if cur:
        out.append("\n".join(cur))
    return out


def _json_field(value: Any, where: str) -> Any:
    if isinstance(value, (bytes, str)):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise CaptureError("bad-json", f"{where} is not JSON: {exc}") from None
    return value


def kong_record(obj: dict) -> list[dict | Skip]:
    """The v1-form record of one Kong log entry (mapping, skips and errors: module docstring).
    Takes the decoded JSON object; returns one record or one :class:`Skip`. Raises
    :class:`CaptureError` (``bad-field`` / ``bad-json``, naming the field)."""
    ai = obj.get("ai")
    if ai is None:
        if "started_at" in obj and isinstance(obj.get("request"), dict):
            return [Skip("kong: log entry with no 'ai' object (a route without an AI plugin)")]
        raise CaptureError("bad-field", f"kong: not a Kong log entry: expected 'ai' with ai.<plugin>.payload and the serializer keys "
                                        f"({', '.join(KONG_KEYS[:4])}); found: {_keys(obj)}")
    if not isinstance(ai, dict):
        raise CaptureError("bad-field", f"kong: ai must be an object, got {type(ai).__name__}")
    ns = next((k for k, v in ai.items() if isinstance(v, dict) and isinstance(v.get("payload"), dict)), None)
    plugin = ai.get(ns) if ns else next((v for v in ai.values() if isinstance(v, dict) and "meta" in v), {})
    payload = plugin.get("payload") if ns else {}
    old = ai.get("payload") if isinstance(ai.get("payload"), dict) else {}  # Kong 3.6/3.7: ai.payload.request
    where = f"ai.{ns}.payload" if ns else "ai.payload"
    req_text = payload.get("request", old.get("request"))
    resp_text = payload.get("response", old.get("response"))
    if req_text is None and resp_text is None:
        return [Skip("kong: AI log entry with no ai.<plugin>.payload (logging.log_payloads off)")]
    meta = plugin.get("meta") if isinstance(plugin.get("meta"), dict) else {}
    lacks = ["raw_completion"]
    request = _json_field(req_text, f"kong: {where}.request") if req_text is not None else {}
    if not isinstance(request, dict):
        raise CaptureError("request-not-object", f"kong: {where}.request is a JSON {type(request).__name__}, not an object")
    if req_text is None:
        lacks.insert(0, "request")
    http = obj.get("request") if isinstance(obj.get("request"), dict) else {}
    route = route_of_url(http.get("uri") or http.get("url")) or route_of_url(obj.get("upstream_uri")) or "chat.completions"
    rec: dict[str, Any] = {"route": route, "request": request, "capture_lacks": lacks}
    if isinstance(resp_text, str) and resp_text.lstrip().startswith(("data:", "event:")):
        rec["stream"] = sse_payloads(resp_text)
    elif resp_text is not None:
        response = _json_field(resp_text, f"kong: {where}.response")
        if not isinstance(response, dict):
            raise CaptureError("bad-field", f"kong: {where}.response must be a JSON object, got {type(response).__name__}")
        if request.get("stream") is True:  # AI Proxy's composite of the frames, calls left out (module docstring)
            lacks += ["stream", "response"]
        else:
            rec["response"] = response
    else:
        lacks.append("response")
    if isinstance(http.get("id"), str):
        rec["id"] = http["id"]
    if isinstance(obj.get("started_at"), (int, float)) and not isinstance(obj.get("started_at"), bool):
        rec["ts"] = obj["started_at"]
    if not request.get("model") and isinstance(meta.get("request_model"), str):
        rec["model"] = meta["request_model"]
    if meta:
        rec["metadata"] = {k: meta[k] for k in ("provider_name", "request_model", "response_model") if k in meta}
    return [rec]


def _consolidated(response: dict) -> dict | None:
    """Helicone's consolidated stream (``choices[{delta, message}]``) as a ``chat.completion`` body,
    or None when ``response`` is an ordinary body."""
    choices = response.get("choices")
    if not (isinstance(choices, list) and choices and all(isinstance(c, dict) and "delta" in c for c in choices)):
        return None
    out = []
    for i, c in enumerate(choices):
        msg = c["message"] if "message" in c else c.get("delta")
        if not isinstance(msg, dict):
            raise CaptureError("bad-field", f"helicone: response_body.choices[{i}].message must be an object, got {type(msg).__name__}")
        msg = {k: v for k, v in msg.items() if k != "role"}
        calls = msg.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise CaptureError("bad-field", f"helicone: response_body.choices[{i}].message.tool_calls must be an array")
            msg["tool_calls"] = [{k: v for k, v in tc.items() if k != "index"} if isinstance(tc, dict) else tc for tc in calls]
        out.append({"index": c.get("index", i), "message": {"role": "assistant", **msg}, "finish_reason": c.get("finish_reason")})
    return {**{k: v for k, v in response.items() if k != "choices"}, "object": "chat.completion", "choices": out}


def helicone_record(obj: dict) -> list[dict]:
    """The v1-form record of one Helicone export record (mapping and errors: module docstring).
    Takes the decoded JSON object; returns one record. Raises :class:`CaptureError` (``bad-field`` /
    ``bad-json``, naming the field)."""
    if "request_id" not in obj or not any(k in obj for k in HELICONE_KEYS):
        raise CaptureError("bad-field", f"helicone: not a Helicone export record: expected request_id and one of "
                                        f"{', '.join(HELICONE_KEYS)}; found: {_keys(obj)}")
    lacks = ["raw_completion"]
    request = _json_field(obj.get("request_body"), "helicone: request_body")
    if request in (None, {}, ""):
        request = {}
        lacks.insert(0, "request")
    elif not isinstance(request, dict):
        raise CaptureError("request-not-object", f"helicone: request_body is a {type(request).__name__}, not an object")
    route = route_of_url(obj.get("request_path")) or "chat.completions"
    rec: dict[str, Any] = {"route": route, "request": request, "capture_lacks": lacks}
    response = _json_field(obj.get("response_body"), "helicone: response_body")
    if response in (None, {}, ""):
        lacks.append("response")
    elif not isinstance(response, dict):
        raise CaptureError("bad-field", f"helicone: response_body must be an object, got {type(response).__name__}")
    else:
        chunks = response.get("streamed_data")
        merged = _consolidated(response) if route == "chat.completions" else None
        if isinstance(chunks, list) and chunks and all(isinstance(c, dict) for c in chunks):
            rec["stream"] = chunks  # the chunks as served, kept beside the consolidated body
        elif merged is not None:
            lacks.append("stream")
            rec["response"] = merged
        else:
            rec["response"] = response
    if request.get("stream") is True and "stream" not in lacks and "stream" not in rec:
        lacks.append("stream")
    rec["id"] = str(obj["request_id"])
    if obj.get("request_created_at") is not None:
        rec["ts"] = obj["request_created_at"]
    if not request.get("model") and isinstance(obj.get("model"), str):
        rec["model"] = obj["model"]
    if obj.get("provider") is not None:
        rec["metadata"] = {"provider": obj["provider"]}
    return [rec]
