"""The SDKs themselves, as the oracle of :mod:`replay.assemble` (tests only: ``openai`` and
``anthropic`` are in the ``test`` extra).

:func:`openai_snapshot` feeds ``chat.completion.chunk`` payloads to the OpenAI SDK's
``ChatCompletionStreamState`` (each payload built into a ``ChatCompletionChunk`` as the SDK's
stream does, ``construct_type``); :func:`anthropic_snapshot` feeds Messages events to the
Anthropic SDK's ``accumulate_event`` and ``build_events``. Both return the same plain shape as
:func:`normal` gives for a :class:`replay.assemble.ClientResult`, or ``{"error": "<Type>"}`` when
the SDK raised.
"""

from __future__ import annotations

import json
from typing import Any


def _norm_args(text: Any) -> Any:
    return text


def normal(res: Any) -> dict:
    """A ClientResult as a plain dict to compare with an SDK snapshot (error: the type only)."""
    if res.error is not None:
        return {"error": res.error.split(":", 1)[0]}
    return {
        "content": res.content,
        "finish_reason": res.finish_reason,
        "calls": [(c.id, c.type, c.name, c.arguments) for c in res.calls],
    }


def openai_snapshot(chunks: list[dict]) -> dict:
    """The OpenAI SDK's snapshot of choice 0 after ``chunks`` (or the type of what it raised)."""
    from openai._models import construct_type
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    st = ChatCompletionStreamState()
    try:
        for c in chunks:
            if c.get("error"):
                return {"error": "APIError"}
            list(st.handle_chunk(construct_type(type_=ChatCompletionChunk, value=c)))
        snap = st.current_completion_snapshot if chunks else None
    except Exception as exc:  # the client's outcome
        return {"error": type(exc).__name__}
    if snap is None or not snap.choices:
        return {"content": None, "finish_reason": None, "calls": []}
    ch = snap.choices[0]
    m = ch.message
    calls = []
    for t in m.tool_calls or []:
        fn = getattr(t, "function", None)
        calls.append((getattr(t, "id", None), getattr(t, "type", None), getattr(fn, "name", None), getattr(fn, "arguments", None)))
    return {"content": m.content, "finish_reason": ch.finish_reason, "calls": calls}


def anthropic_snapshot(events: list[dict]) -> dict:
    """The Anthropic SDK's message snapshot after ``events`` (or the type of what it raised):
    text blocks joined, tool_use blocks as ``(id, type, name, input as JSON text)``."""
    from anthropic.lib.streaming._messages import accumulate_event, build_events

    snap = None
    bufs: dict[int, bytes] = {}
    try:
        for ev in events:
            if ev.get("type") == "error":
                return {"error": "APIStatusError"}
            if ev.get("type") == "ping":
                continue
            snap = accumulate_event(event=ev, current_snapshot=snap, json_bufs=bufs)
            from anthropic._models import construct_type_unchecked
            from anthropic.types import RawMessageStreamEvent

            build_events(event=construct_type_unchecked(type_=RawMessageStreamEvent, value=ev), message_snapshot=snap)
    except Exception as exc:
        return {"error": type(exc).__name__}
    if snap is None:
        return {"content": None, "finish_reason": None, "calls": []}
    texts = [b.text for b in snap.content if getattr(b, "type", None) == "text"]
    calls = [
        (b.id, b.type, b.name, json.dumps(b.input, ensure_ascii=False, separators=(",", ":")))
        for b in snap.content
        if getattr(b, "type", None) in ("tool_use", "server_tool_use")
    ]
    return {"content": "".join(texts) if texts else None, "finish_reason": snap.stop_reason, "calls": calls}
