"""The served side, checked from the captured stream (or response body) alone: no raw completion needed.

A client rebuilds tool calls from a stream in its own way, and each API has its own ways to go wrong:

- OpenAI Chat Completions (``chat.completions``): the SDK merges ``delta.tool_calls[]`` entries by
  ``index`` (``openai.lib.streaming.chat``); a call's first entry carries ``id`` and
  ``function.name``, later ones only ``function.arguments`` fragments.
- Anthropic Messages (``messages``): one call per ``tool_use`` content block; ``content_block_start``
  names it, ``input_json_delta.partial_json`` fragments build its input, ``content_block_stop``
  closes it (Anthropic SDK ``MessageStream``).
- OpenAI Responses (``responses``): one call per ``function_call`` output item;
  ``response.output_item.added`` names it, ``response.function_call_arguments.delta`` fragments
  build its arguments, ``.done`` / ``response.output_item.done`` close it.

:func:`check_served` returns, for one exchange, the ``served_*`` check columns of
:data:`replay.tables.EXCHANGES`:

- ``served_non_json_calls``: assembled calls whose joined arguments are not a JSON object
  (:func:`replay.checks.json_object`, the rule the replay sides are judged by);
- ``served_name_repeats``: a name sent again for a call that already had one (OpenAI: a non-empty
  ``function.name`` on a later entry of the same index, which the SDK's generic accumulator would
  concatenate; Anthropic: a second ``content_block_start`` for one block index; Responses: a
  second ``output_item.added`` for one ``output_index``);
- ``served_index_faults``: indices out of order: a call's first index is not the next one (it
  skips, or goes back to an index opened before), a fragment arrives for an index never opened
  (or, for Anthropic and Responses, already closed), or an OpenAI entry has no usable ``index``;
  a fragment for an earlier call after a later one was opened counts too (calls interleaved);
- ``served_markup``: the first of the model family's call markers (the ``markers`` of its
  :mod:`replay.parsers` class, reasoning markers left out) found in the served content, or, when
  the model maps to no family, the first marker of any family; null when none;
- ``served_stop_with_calls``: calls were served and ``finish_reason`` is ``stop`` (Chat
  Completions) or ``stop_reason`` is ``end_turn`` / ``stop_sequence`` (Messages); null for the
  Responses API, whose ``status`` has no such value, and when nothing was served.

Counts are null when they do not apply: the name and index checks need a stream (a response body
has no fragments). Every function here is pure and never raises on a list of dicts.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterator

from replay.checks import json_object  # the rule non-json-join judges the replay sides by

__all__ = [
    "check_chat_stream",
    "check_messages_stream",
    "check_responses_stream",
    "call_markers",
    "check_served",
    "markup_in",
]

_INT32_MAX = 2**31 - 1

#: Markers that open or close reasoning, not a call: never counted as call markup.
_REASONING = ("think", "THINK", "<response>", "</response>", "<|channel>", "<channel|>")


def _idx(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _INT32_MAX
    return value if ok else None


class _Order:
    """Tracks call indices as they open, and counts the faults of :func:`check_served`."""

    def __init__(self) -> None:
        self.opened: list[int] = []  # in order of opening
        self.closed: set[int] = set()
        self.faults = 0

    def open(self, idx: int | None) -> bool:
        """A call opens at ``idx``; False (and a fault) when it is not the next index."""
        if idx is None:
            self.faults += 1
            return False
        expected = (max(self.opened) + 1) if self.opened else 0
        if idx in self.opened or idx != expected:
            self.faults += 1
            if idx not in self.opened:
                self.opened.append(idx)
            return False
        self.opened.append(idx)
        return True

    def fragment(self, idx: int | None, *, closable: bool) -> None:
        """A fragment for the call at ``idx``: a fault when never opened, closed, or not the latest."""
        if idx is None or idx not in self.opened or (closable and idx in self.closed) or idx != self.opened[-1]:
            self.faults += 1

    def close(self, idx: int | None) -> None:
        if idx is not None:
            self.closed.add(idx)


def first_choices(chunks: list[dict]) -> Iterator[dict]:
    """The entries of choice 0 in ``chat.completion.chunk`` payloads, in order: each chunk's
    ``choices`` items that are objects with ``index`` 0 (a missing index counts as 0). Chunks
    without a ``choices`` list (usage chunks) give nothing. The OpenAI SDK assembles choice 0 alone
    for ``message``; the served-side checks read the same entries."""
    for chunk in chunks:
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            continue
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                yield choice


def check_chat_stream(chunks: list[dict]) -> tuple[int, int]:
    """``(name_repeats, index_faults)`` of OpenAI ``chat.completion.chunk`` payloads (choice 0).

    A ``tool_calls`` entry whose ``index`` was not seen opens a call; a later entry of that index is
    a fragment (an ``id`` or non-empty ``function.name`` on it is a repeat when the call already had
    a name). Rules: see the module docstring.
    """
    order = _Order()
    named: set[int] = set()
    repeats = 0
    for choice in first_choices(chunks):
        delta = choice.get("delta")
        tcs = delta.get("tool_calls") if isinstance(delta, dict) else None
        if not isinstance(tcs, list):
            continue
        for tc in tcs:
            if not isinstance(tc, dict):
                continue
            idx = _idx(tc.get("index"))
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
            name = fn.get("name")
            if idx is None or idx not in order.opened:
                order.open(idx)
            else:
                order.fragment(idx, closable=False)
            if isinstance(name, str) and name:
                if idx is not None and idx in named:
                    repeats += 1
                elif idx is not None:
                    named.add(idx)
    return repeats, order.faults


def check_messages_stream(events: list[dict]) -> tuple[int, int]:
    """``(name_repeats, index_faults)`` of Anthropic Messages stream events, per content block.

    Every content block (text and tool_use alike) takes the next ``index``; a second
    ``content_block_start`` for one index is a name repeat when the block is a ``tool_use``, and an
    index fault in any case. A ``content_block_delta`` for a block not started, already stopped or
    not the latest one is an index fault.
    """
    order = _Order()
    repeats = 0
    for ev in events:
        et = ev.get("type")
        idx = _idx(ev.get("index"))
        if et == "content_block_start":
            cb = ev.get("content_block") if isinstance(ev.get("content_block"), dict) else {}
            if idx is not None and idx in order.opened and cb.get("type") in ("tool_use", "server_tool_use"):
                repeats += 1
            order.open(idx)
            if idx is not None:
                order.closed.discard(idx)
        elif et == "content_block_delta":
            order.fragment(idx, closable=True)
        elif et == "content_block_stop":
            order.close(idx)
    return repeats, order.faults


def check_responses_stream(events: list[dict]) -> tuple[int, int]:
    """``(name_repeats, index_faults)`` of OpenAI Responses stream events, per output item.

    ``response.output_item.added`` opens the item at ``output_index`` (every item type takes the
    next index); a second one for a ``function_call`` item already added is a name repeat.
    ``response.function_call_arguments.delta`` for an item not added, already done or not the
    latest is an index fault; ``response.output_item.done`` closes the item.
    """
    order = _Order()
    repeats = 0
    for ev in events:
        et = ev.get("type")
        idx = _idx(ev.get("output_index"))
        if et == "response.output_item.added":
            item = ev.get("item") if isinstance(ev.get("item"), dict) else {}
            if idx is not None and idx in order.opened and item.get("type") == "function_call":
                repeats += 1
            order.open(idx)
        elif et == "response.function_call_arguments.delta":
            order.fragment(idx, closable=True)
        elif et == "response.output_item.done":
            order.close(idx)
    return repeats, order.faults


@lru_cache(maxsize=256)
def call_markers(model: str | None) -> tuple[str, ...]:
    """The call markers looked for in served content for ``model``: its family's
    (:func:`replay.parsers.family_for_model`) without reasoning markers, longest first; every
    family's when the model maps to none."""
    from replay.parsers import PARSERS, family_for_model

    family = family_for_model(model) if model else None
    classes = [PARSERS[family]] if family in PARSERS else list({c: None for c in PARSERS.values()})
    out = {m for cls in classes for m in getattr(cls, "markers", ()) if not any(r in m for r in _REASONING)}
    return tuple(sorted(out, key=lambda m: (-len(m), m)))


def markup_in(content: str | None, model: str | None) -> str | None:
    """The call marker of :func:`call_markers` that occurs first in ``content`` (ties: the longest),
    or None."""
    if not content:
        return None
    best: tuple[int, int, str] | None = None
    for m in call_markers(model):
        at = content.find(m)
        if at >= 0 and (best is None or (at, -len(m)) < best[:2]):
            best = (at, -len(m), m)
    return best[2] if best else None


_STREAM_CHECKS = {
    "chat.completions": check_chat_stream,
    "messages": check_messages_stream,
    "responses": check_responses_stream,
}


def check_served(
    route: str,
    model: str | None,
    payloads: list[dict] | None,
    content: str | None,
    calls: list[dict] | None,
    finish: str | None,
) -> dict[str, Any]:
    """The ``served_*`` check columns for one exchange (see the module docstring).

    ``route``: ``chat.completions`` | ``messages`` | ``responses``; ``model``: served model name
    (picks the markers); ``payloads``: the stream's payload objects (None for a response body or
    when nothing was captured); ``content`` / ``calls`` / ``finish``: what the client assembled.
    Returns a dict with the five column names as keys.
    """
    served = payloads is not None or content is not None or calls is not None or finish is not None
    out: dict[str, Any] = {
        "served_non_json_calls": None,
        "served_name_repeats": None,
        "served_index_faults": None,
        "served_markup": markup_in(content, model),
        "served_stop_with_calls": None,
    }
    if not served:
        return out
    out["served_non_json_calls"] = sum(1 for c in calls or () if not json_object(c.get("arguments")))
    if payloads is not None and route in _STREAM_CHECKS:
        out["served_name_repeats"], out["served_index_faults"] = _STREAM_CHECKS[route](payloads)
    if route == "chat.completions":
        out["served_stop_with_calls"] = bool(calls) and finish == "stop"
    elif route == "messages":
        out["served_stop_with_calls"] = bool(calls) and finish in ("end_turn", "stop_sequence")
    return out
