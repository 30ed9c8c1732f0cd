"""Langfuse observations (format ``langfuse``): the API's pages and the bucket export, one JSON value per line or one document.

What is read (the ``Observation`` of Langfuse's public API, ``fern/apis/server/definition/``;
``langfuse.api.ObservationV2`` in the Python SDK): an observation object per line (the blob-storage
export as JSONL), a JSON array of them (the export as JSON), or a page of ``GET
/api/public/observations`` / ``/api/public/v2/observations`` (``{"data": [...], "meta": {...}}``,
every observation of the page a record at that line). Fields used: ``id``, ``traceId``, ``type``,
``startTime``, ``completionStartTime``, ``model``, ``input``, ``output``, ``metadata``.

What langfuse-python's OpenAI integration (``from langfuse.openai import openai``,
``langfuse/openai.py``) logs for a chat completion, and how it is read (each from the fixture that
integration wrote, ``tests/data/captures/langfuse/``): ``input`` is ``{"tools": [...],
"messages": [...]}`` when the call declared tools (or functions), else the bare message list (so a
bare list means no tools were sent); ``output`` is the message ``{role, content, tool_calls}``, or,
for a streamed text answer, the text alone; ``metadata.finish_reason`` is set for streams only;
``completionStartTime`` is set from a stream's first chunk only, so its presence is the request's
``stream: true``. The request is rebuilt as ``{"model", "messages", "tools"}``: the observation's
``modelParameters`` hold the integration's defaults (``"max_tokens": "Infinity"``), not what was
sent, and are left out. Lacks, always: ``exact_request``, ``raw_completion``, ``stream`` (a stream
is logged assembled); ``response`` when there is no ``output``.

Skipped, with the reason counted: an observation whose ``type`` is not ``GENERATION`` (``SPAN``,
``EVENT``, ``EMBEDDING``, ``AGENT``, ``TOOL``, ...). Errors (``bad-field``, naming the field): an
``input`` that is neither a message list nor an object with ``messages``, an ``output`` that is
neither an object nor a text, an object that is not an observation (the keys expected and found).
"""

from __future__ import annotations

from typing import Any

from replay.capture.records import Skip
from replay.capture.v1 import CaptureError

__all__ = ["OBSERVATION_KEYS", "observation_record", "records_from_value"]

#: The keys of a Langfuse observation this reader needs (``input`` / ``output`` may be null).
OBSERVATION_KEYS = ("id", "traceId", "type", "startTime")


def _keys(obj: dict) -> str:
    return ", ".join(list(obj)[:8]) or "none"


def observation_record(obs: Any) -> dict | Skip:
    """The v1-form record of one observation (mapping, skips, errors: module docstring). Raises
    :class:`CaptureError` (``bad-field``) naming the field."""
    if not isinstance(obs, dict) or not all(k in obs for k in ("traceId", "type")):
        found = _keys(obs) if isinstance(obs, dict) else f"a JSON {type(obs).__name__}"
        raise CaptureError("bad-field", f"langfuse: not an observation: expected {', '.join(OBSERVATION_KEYS)}; found: {found}")
    kind = obs.get("type")
    if kind != "GENERATION":
        return Skip(f"langfuse: observation type {str(kind)[:30]} is not a model call")
    inp, out = obs.get("input"), obs.get("output")
    request: dict[str, Any] = {"model": obs.get("model")}
    if isinstance(inp, list):
        request["messages"] = inp
    elif isinstance(inp, dict) and isinstance(inp.get("messages"), list):
        request["messages"] = inp["messages"]
        for key in ("tools", "functions", "function_call", "tool_choice"):
            if inp.get(key) is not None:
                request[key] = inp[key]
        if "tools" in request and not isinstance(request["tools"], list):
            raise CaptureError("bad-field", f"langfuse: input.tools must be an array, got {type(request['tools']).__name__}")
    else:
        shown = type(inp).__name__ if not isinstance(inp, dict) else "an object without a 'messages' array"
        raise CaptureError("bad-field", f"langfuse: input must be a message list or {{tools, messages}}, got {shown}")
    if obs.get("completionStartTime"):
        request["stream"] = True
    lacks = ["exact_request", "raw_completion", "stream"]
    rec: dict[str, Any] = {"route": "chat.completions", "request": request, "capture_lacks": lacks}
    meta = obs.get("metadata") if isinstance(obs.get("metadata"), dict) else {}
    finish = meta.get("finish_reason") if isinstance(meta.get("finish_reason"), str) else None
    if isinstance(out, dict):
        msg = {k: out[k] for k in ("content", "tool_calls", "function_call") if k in out}
        msg.setdefault("content", None)
        rec["response"] = {"object": "chat.completion", "model": obs.get("model"),
                           "choices": [{"index": 0, "message": {"role": "assistant", **msg}, "finish_reason": finish}]}
    elif isinstance(out, str):
        rec["response"] = {"object": "chat.completion", "model": obs.get("model"),
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": out}, "finish_reason": finish}]}
    elif out is None:
        lacks.append("response")
    else:
        raise CaptureError("bad-field", f"langfuse: output must be a message object or a text, got {type(out).__name__}")
    if isinstance(obs.get("id"), str):
        rec["id"] = obs["id"]
    if obs.get("startTime") is not None:
        rec["ts"] = obs["startTime"]
    if isinstance(obs.get("model"), str):
        rec["model"] = obs["model"]
    return rec


def records_from_value(obj: Any) -> list[dict | Skip | CaptureError]:
    """The records of one decoded JSON value: a page (``data`` + ``meta``: one item per
    observation, an observation that cannot be mapped a :class:`CaptureError` naming its index so
    the others still count) or one observation. Raises :class:`CaptureError` for anything else."""
    if isinstance(obj, dict) and isinstance(obj.get("data"), list) and "meta" in obj:
        out: list[dict | Skip | CaptureError] = []
        for i, obs in enumerate(obj["data"]):
            try:
                out.append(observation_record(obs))
            except CaptureError as exc:
                out.append(CaptureError(exc.reason, f"data[{i}]: {exc.detail}"))
        return out
    return [observation_record(obj)]
