"""A new-side tool parser for the tests: Hermes, but every streamed completion loses its last
call (held until the end, then dropped): dropped-call exemplars in the audit and matrix reports."""

from replay.parsers.base import StreamDelta
from replay.parsers.hermes import HermesParser


class DropLast(HermesParser):
    def __init__(self, tools=None, **kw):
        super().__init__(tools, **kw)
        self._held = []

    def feed(self, delta):
        d = super().feed(delta)
        self._held.extend(d.calls)
        return StreamDelta(content=d.content, reasoning=d.reasoning)

    def finish(self):
        d = super().finish()
        held = self._held + list(d.calls)
        gone = max((c.index for c in held), default=None)
        return StreamDelta(content=d.content, reasoning=d.reasoning, calls=[c for c in held if c.index != gone])
