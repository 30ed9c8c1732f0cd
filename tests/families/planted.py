"""The planted bugs the family suite proves the stream == whole property catches, for any family.

Each is a mixin put in front of a family's parser class (:func:`plant`):

* :class:`~strategies.RawArgsFirst` (a): the model's raw argument text is sent before the parsed
  JSON (the client joins both: not JSON). Uses the families' ``_emit_call`` hook.
* :class:`~strategies.SilentFinish` (b): ``finish()`` reports nothing (held-back text and calls
  decided at the end are lost).
* :class:`~strategies.DropFinishCalls` (b'): ``finish()`` keeps its text but drops its calls.
* :class:`GreedyMerge` (c): the whole-text parse merges two consecutive calls into one (the first
  name, both argument objects), as a greedy ``START(.*)END`` regex does.
* :class:`LateCalls` (d): the calls of each delta are sent with the next delta and never flushed,
  so the calls completed in the last delta are lost (vLLM #48020's shape).
"""

from __future__ import annotations

import json

from replay.parsers.base import ParseResult, StreamDelta, ToolCall
from strategies import DropFinishCalls, RawArgsFirst, SilentFinish


class GreedyMerge:
    """Planted bug (c): consecutive calls 0 and 1 of the whole-text parse become one call."""

    def parse(self, text):
        got = super().parse(text)
        if len(got.calls) < 2:
            return got
        a, b = got.calls[0], got.calls[1]
        try:
            merged = {**json.loads(a.arguments), **json.loads(b.arguments)}
        except (ValueError, TypeError):
            merged = {}
        calls = (ToolCall(a.name, json.dumps(merged, ensure_ascii=False)), *got.calls[2:])
        return ParseResult(got.content, calls, got.reasoning)


class LateCalls:
    """Planted bug (d): a delta's call events are held until the next delta; ``finish()`` sends
    only its own, so calls completed in the last delta never reach the client."""

    def feed(self, delta):
        out = super().feed(delta)
        late, self._late = getattr(self, "_late", []), list(out.calls)
        return StreamDelta(content=out.content, calls=late, reasoning=getattr(out, "reasoning", ""))


BUGS = {
    "raw-args-first": RawArgsFirst,
    "silent-finish": SilentFinish,
    "drop-finish-calls": DropFinishCalls,
    "greedy-merge": GreedyMerge,
    "late-calls": LateCalls,
}


def plant(bug: str, cls: type) -> type:
    """``cls`` with the planted bug ``bug`` (a key of :data:`BUGS`)."""
    return type(f"{cls.__name__}_{bug.replace('-', '_')}", (BUGS[bug], cls), {})
