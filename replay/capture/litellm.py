"""LiteLLM logs (format ``litellm``): spend-log rows and standard logging payloads, one JSON object per line.

Two shapes are read (LiteLLM proxy docs: "StandardLoggingPayload Specification" and the
``LiteLLM_SpendLogs`` table):

- a spend-log row: ``request_id``, ``call_type``, ``model``, ``startTime``, ``messages``,
  ``response``, ``proxy_server_request`` (the body the proxy received, when stored), ``metadata``;
  JSON columns may be JSON text;
- a ``StandardLoggingPayload`` (``id``, ``call_type``, ``model``, ``messages``, ``response``,
  ``model_parameters``, ``metadata``, ``startTime``), alone or under ``standard_logging_object``.

Mapping: the request is ``proxy_server_request`` when it is an object (the body as sent), else it
is rebuilt as ``{"model", "messages", **model_parameters}`` (``model_parameters`` holds ``tools``
when LiteLLM logged them) and ``capture_lacks`` says ``exact_request``; a row with neither lacks
``request``. ``response`` is the final response object (OpenAI ``chat.completion`` form, as LiteLLM
returns it): the served side is checked on it. Route from ``call_type``: ``anthropic_messages`` ->
``messages``, ``responses`` / ``aresponses`` -> ``responses``, else ``chat.completions``.

What LiteLLM logs lack, always: the raw completion (``raw_completion``: nothing to re-stream) and
the chunks (``stream``: a streamed response is logged assembled, so the name and index checks do
not apply). ``metadata`` (keys, team, user) travels in the record's ``metadata`` and never reaches a
table.
"""

from __future__ import annotations

from typing import Any

import orjson

from replay import exactjson
from replay.capture.v1 import CaptureError

__all__ = ["record_from_row"]


def _maybe_json(value: Any) -> Any:
    if isinstance(value, (str, bytes)) and value[:1] in ("{", "[", b"{", b"["):
        try:
            return exactjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


#: Fields of which a LiteLLM spend-log row / standard logging payload has at least one.
ROW_KEYS = ("call_type", "messages", "response", "proxy_server_request", "model_parameters")


def record_from_row(obj: dict) -> list[dict]:
    """The v1-form record of one LiteLLM row (mapping: module docstring). Raises
    :class:`CaptureError` (``bad-field``) when ``messages`` or ``response`` has the wrong type, or
    the object has none of :data:`ROW_KEYS` (not a LiteLLM row)."""
    if isinstance(obj.get("standard_logging_object"), dict):
        obj = obj["standard_logging_object"]
    if not any(k in obj for k in ROW_KEYS):
        raise CaptureError("bad-field", f"not a LiteLLM row: none of {', '.join(ROW_KEYS)}; keys: {', '.join(list(obj)[:6])}")
    call_type = obj.get("call_type") if isinstance(obj.get("call_type"), str) else ""
    route = "messages" if "anthropic" in call_type else "responses" if call_type.endswith("responses") else "chat.completions"
    lacks = ["raw_completion", "stream"]
    psr = _maybe_json(obj.get("proxy_server_request"))
    messages = _maybe_json(obj.get("messages"))
    params = _maybe_json(obj.get("model_parameters"))
    if isinstance(psr, dict) and psr:
        request = psr
    elif isinstance(messages, list):
        request = {"model": obj.get("model"), "messages": messages}
        if isinstance(params, dict):
            request.update({k: v for k, v in params.items() if k not in request})
        lacks.insert(0, "exact_request")
    elif messages in (None, {}, "", []):
        request = {}
        lacks.insert(0, "request")
    else:
        raise CaptureError("bad-field", f"messages must be a list, got {type(messages).__name__}")
    response = _maybe_json(obj.get("response"))
    if response in ({}, "", None):
        response = None
        lacks.append("response")
    elif not isinstance(response, dict):
        raise CaptureError("bad-field", f"response must be an object, got {type(response).__name__}")
    rec: dict[str, Any] = {"route": route, "request": request, "capture_lacks": lacks}
    if response is not None:
        rec["response"] = response
    rid = obj.get("request_id") if obj.get("request_id") is not None else obj.get("id")
    if rid is not None:
        rec["id"] = rid
    if isinstance(obj.get("model"), str):
        rec["model"] = obj["model"]
    ts = obj.get("startTime")
    if isinstance(ts, (str, int, float)) and not isinstance(ts, bool):
        rec["ts"] = ts
    if obj.get("metadata") is not None:
        rec["metadata"] = obj["metadata"]
    return [rec]
