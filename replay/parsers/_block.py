"""Streaming decision for a block body of the shape: ws, one JSON value, ws, end marker.

Shared by the streaming parsers whose call blocks end in "JSON body then end marker" (Hermes,
DeepSeek V3.1; also the shape of Llama JSON, Kimi K2 and Mistral). The whole-text parses do not
use it: they read the body with ``json.JSONDecoder().raw_decode``, which keeps stream and
whole-text parse independent for the property tests.
"""

from __future__ import annotations

from typing import NamedTuple

from replay.parsers._jsonscan import DONE, MORE, JsonPrefix, skip_ws


class Decided(NamedTuple):
    """A decided block: ``end`` is the index just after the block (chars, in the parser's buffer).

    ``span`` is ``(start, end)`` of the JSON value in the buffer (chars) when the body is one
    complete JSON value followed only by whitespace and then the end marker, or by whitespace up
    to the end of the stream; else None (the body does not have that shape: the block is
    content up to ``end``). Whether the value makes a call (its type, its keys) is the parser's
    to judge.
    """

    end: int
    span: tuple[int, int] | None


class JsonBlock:
    """Incremental decision on one block body: ws, a JSON value, ws, then ``end_marker``.

    Takes ``end_marker`` (the text that closes the block) and ``body_start`` (index in chars, in
    the parser's buffer, where the body begins: just after the start marker or separator). The
    parser then calls :meth:`advance` with its whole growing buffer (which must keep the block's
    text at the same indices: only appended to, never cut, until decided) and ``final`` (True at
    the end of the stream). It returns None while undecided, else a :class:`Decided`:

    * the JSON value is complete and followed by ws and ``end_marker``: ``end`` just after the
      marker, ``span`` the value;
    * at ``final``, the value is complete and followed only by ws: ``end`` = ``len(buf)``, ``span``
      the value;
    * otherwise (only ws, or text that cannot be a JSON value, or other text after the value):
      ``span`` None and ``end`` just after the first ``end_marker`` after the value (after the
      value's start when it does not decode), or ``len(buf)`` at ``final`` when there is none.

    While undecided it keeps its scan state, so the JSON is scanned once, incrementally, and the
    end marker is searched for only in new text. Once it has decided it must not be called again.
    """

    def __init__(self, end_marker: str, body_start: int) -> None:
        self.end_marker = end_marker
        self._phase = "pre"
        self._scan = JsonPrefix()
        self._fed = body_start  # buffer index up to which the scanner has been fed
        self._j = body_start  # start of the JSON value in the buffer
        self._k = 0  # end of the JSON value in the buffer
        self._seek = 0  # where to look for the end marker next

    def advance(self, buf: str, final: bool) -> Decided | None:
        """Move on over ``buf``; None while undecided, else the block's :class:`Decided`."""
        end_marker = self.end_marker
        if self._phase == "pre":
            j = skip_ws(buf, self._j)
            if j == len(buf):
                return Decided(len(buf), None) if final else None
            self._j = self._fed = j
            self._phase = "json"
        if self._phase == "json":
            status = self._scan.feed(buf[self._fed :])
            self._fed = len(buf)
            if status == MORE and final:
                status = self._scan.close()
            if status == MORE:
                return None
            if status == DONE:
                assert self._scan.end is not None
                self._k = self._j + self._scan.end
                self._phase = "post"
            else:
                self._seek = self._j
                self._phase = "seek"
        if self._phase == "post":
            m = skip_ws(buf, self._k)
            if buf.startswith(end_marker, m):
                return Decided(m + len(end_marker), (self._j, self._k))
            if m == len(buf):
                return Decided(len(buf), (self._j, self._k)) if final else None
            if not final and end_marker.startswith(buf[m:]):
                return None
            self._seek = self._k
            self._phase = "seek"
        e = buf.find(end_marker, self._seek)
        if e < 0:
            if final:
                return Decided(len(buf), None)
            self._seek = max(self._seek, len(buf) - len(end_marker) + 1)
            return None
        return Decided(e + len(end_marker), None)
