"""LiteLLM logs (format ``litellm``): spend-log rows and standard logging payloads, as LiteLLM writes them.

Shapes read (checked on files the ``litellm`` package wrote: tests/data/captures/litellm*/, by
``tests/writers/litellm_writer.py``; field facts from LiteLLM's ``litellm/types/utils.py``
(``StandardLoggingPayload``), ``schema.prisma`` (``LiteLLM_SpendLogs``) and
``proxy/spend_tracking/spend_tracking_utils.py`` / ``spend_management_endpoints.py``):

- a ``StandardLoggingPayload`` (``id``, ``call_type``, ``model``, ``messages``, ``response``,
  ``model_parameters``, ``metadata``, ``startTime``), one a line as a custom callback writes it,
  one per object as the S3/GCS bucket loggers write it, alone or under ``standard_logging_object``;
- a spend-log row (``request_id``, ``call_type``, ``spend``, ``startTime``, ``messages``,
  ``response``, ``metadata``; JSON columns may be JSON text). Current releases keep the body the
  proxy received in ``proxy_server_request`` (``messages`` is then ``{}``); older ones (1.67) keep
  it as JSON text in ``metadata.proxy_server_request``;
- ``GET /spend/logs``: a JSON array of rows; ``GET /spend/logs/v2``: a page ``{"data": [rows],
  "total", "page", "page_size", "total_pages"}``. Each row is one record (at the file's line;
  errors name the row's index).

Mapping: the request is the body the proxy received (``proxy_server_request``, else
``metadata.proxy_server_request``) when it is a non-empty object; else it is rebuilt as
``{"model", "messages", **model_parameters}`` (``model_parameters`` holds ``tools`` when LiteLLM
logged them) and ``capture_lacks`` says ``exact_request``; a row with neither lacks ``request``.
``response`` is the final response object (OpenAI ``chat.completion`` form, as LiteLLM returns
it): the served side is checked on it. Route from ``call_type``: ``anthropic_messages`` ->
``messages``, ``responses`` / ``aresponses`` -> ``responses``, else ``chat.completions``.

What LiteLLM logs lack, always: the raw completion (``raw_completion``: nothing to re-stream) and
the chunks (``stream``: a streamed response is logged assembled, so the name and index checks do
not apply). ``metadata`` (keys, team, user) travels in the record's ``metadata`` and never reaches a
table.

Errors (``bad-field``) name the format, the row and the field: ``litellm spend-log row 2: field
'response' must be an object, got int``; an object with none of the distinctive keys (a file
forced to ``--capture-format litellm`` that is not LiteLLM's) says which keys were expected and
which were found.
"""

from __future__ import annotations

from typing import Any

import orjson

from replay import exactjson
from replay.capture.v1 import CaptureError, decode_line

__all__ = ["ROW_KEYS", "decode", "kind_of", "record_from_row"]


def _maybe_json(value: Any) -> Any:
    if isinstance(value, (str, bytes)) and value[:1] in ("{", "[", b"{", b"["):
        try:
            return exactjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


#: Distinctive keys: ``call_type`` (every LiteLLM log) or ``standard_logging_object``; a
#: spend-log row has ``request_id`` with ``call_type`` or one of :data:`ROW_KEYS`.
ROW_KEYS = ("spend", "proxy_server_request", "messages")


def kind_of(obj: Any) -> str | None:
    """``"payload"`` (a standard logging payload), ``"row"`` (a spend-log row), ``"array"`` (a
    ``/spend/logs`` array), ``"page"`` (a ``/spend/logs/v2`` page) or None for one decoded value
    (distinctive keys: ``standard_logging_object``; ``call_type``, with ``request_id`` a row;
    ``request_id`` with one of :data:`ROW_KEYS`; an array or page by its first row)."""
    if isinstance(obj, list):
        return "array" if obj and kind_of(obj[0]) in ("payload", "row") else None
    if not isinstance(obj, dict):
        return None
    if "standard_logging_object" in obj:
        return "payload"
    if "call_type" in obj:
        return "row" if "request_id" in obj else "payload"
    if "request_id" in obj and any(k in obj for k in ROW_KEYS):
        return "row"
    if isinstance(obj.get("data"), list) and "page" in obj and kind_of(obj["data"]) == "array":
        return "page"
    return None


def _keys(obj: Any) -> str:
    if isinstance(obj, dict):
        return ", ".join(list(obj)[:8]) or "none"
    return f"a JSON {type(obj).__name__}"


def record_from_row(obj: Any) -> list[Any]:
    """The v1-form records of one decoded LiteLLM value (mapping: module docstring): one for a
    payload or row, one per row for a ``/spend/logs`` array or ``/spend/logs/v2`` page (a row
    that fails is a :class:`CaptureError` in its place). Raises :class:`CaptureError`
    (``bad-field``) when the value is none of these (:func:`kind_of`) (the detail lists the keys expected and
    found), or a single row's field has the wrong type."""
    if isinstance(obj, dict) and isinstance(obj.get("data"), list) and "page" in obj:
        rows, what = obj["data"], "/spend/logs/v2 page"
    elif isinstance(obj, list):
        rows, what = obj, "/spend/logs array"
    else:
        kind = kind_of(obj)
        if kind is None:
            raise CaptureError(
                "bad-field",
                "not a LiteLLM row: expected call_type or standard_logging_object (standard logging payload), "
                "request_id with call_type or one of " + ", ".join(ROW_KEYS)
                + " (spend-log row), a JSON array of rows or a page {data, page}; found keys: " + _keys(obj),
            )
        return [_record(obj, "litellm standard logging payload" if kind == "payload" else "litellm spend-log row")]
    out: list[Any] = []
    for i, row in enumerate(rows):
        where = f"litellm {what} row {i}"
        try:
            if kind_of(row) not in ("payload", "row"):
                raise CaptureError("bad-field", f"{where}: not a spend-log row (expected request_id with call_type or one of {', '.join(ROW_KEYS)}); found keys: {_keys(row)}")
            out.append(_record(row, where))
        except CaptureError as exc:
            out.append(exc)
    return out


def decode(raw: bytes) -> Any:
    """One line of a LiteLLM file: a JSON object (:func:`replay.capture.v1.decode_line`) or a JSON
    array (a ``/spend/logs`` response). Raises :class:`CaptureError` as ``decode_line`` does, its
    detail led by the format (``litellm record: ...``)."""
    try:
        return decode_line(raw)
    except CaptureError as exc:
        if exc.reason == "not-object":
            value = exactjson.loads(raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw)
            if isinstance(value, list):
                return value
        raise CaptureError(exc.reason, f"litellm record: {exc.detail}") from None


def _body_in_metadata(metadata: Any, where: str) -> Any:
    """``metadata.proxy_server_request`` (older releases: the body as JSON text), or None."""
    if not isinstance(metadata, dict) or "proxy_server_request" not in metadata:
        return None
    body = _maybe_json(metadata["proxy_server_request"])
    if body in (None, "", {}):
        return None
    if not isinstance(body, dict):
        raise CaptureError("bad-field", f"{where}: field 'metadata.proxy_server_request' must be a JSON object, got {type(body).__name__}")
    return body


def _record(obj: dict, where: str) -> dict:
    if isinstance(obj.get("standard_logging_object"), dict):
        obj = obj["standard_logging_object"]
    call_type = obj.get("call_type") if isinstance(obj.get("call_type"), str) else ""
    route = "messages" if "anthropic" in call_type else "responses" if call_type.endswith("responses") else "chat.completions"
    lacks = ["raw_completion", "stream"]
    psr = _maybe_json(obj.get("proxy_server_request"))
    if psr not in (None, "", {}) and not isinstance(psr, dict):
        raise CaptureError("bad-field", f"{where}: field 'proxy_server_request' must be a JSON object, got {type(psr).__name__}")
    metadata = _maybe_json(obj.get("metadata"))
    if not psr:
        psr = _body_in_metadata(metadata, where)
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
        raise CaptureError("bad-field", f"{where}: field 'messages' must be a list, got {type(messages).__name__}")
    response = _maybe_json(obj.get("response"))
    if response in ({}, "", None):
        response = None
        lacks.append("response")
    elif not isinstance(response, dict):
        raise CaptureError("bad-field", f"{where}: field 'response' must be an object, got {type(response).__name__}")
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
    if metadata is not None:
        rec["metadata"] = metadata
    return rec
