"""A block body of the shape: ws, one JSON value, ws, end marker; decided whole or streamed.

Shared by the parsers whose call blocks end in "JSON body then end marker" (Hermes, DeepSeek V3 and
V3.1, Kimi K2: the end marker closes the block; Mistral, Granite 3: the next start marker ends it
and starts the next block). :func:`read_json_block` decides a block of a whole text (it reads the
value with :func:`~replay.parsers._jsonscan.decode_at`); :class:`JsonBlock` decides it as the text
streams in (it scans with :class:`~replay.parsers._jsonscan.JsonPrefix`). The two find a value's
extent independently, which keeps stream and whole-text parse independent for the property tests.
Both decode a value with the depth rule of :mod:`replay.parsers._jsonscan`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

from replay.parsers._jsonscan import DONE, MORE, JsonPrefix, decode_at, loads_or_too_deep, skip_ws
from replay.parsers._markers import first_marker


class _NoValue:
    def __repr__(self) -> str:
        return "NO_VALUE"


#: The value of a block body that is not one JSON value followed by ws and an end marker (or ws to
#: the end of the text); it is no JSON kind, so every call check rejects it.
NO_VALUE: Any = _NoValue()


def object_arguments(obj: Any) -> str | None:
    """The arguments text of a block whose value must be the arguments object:
    ``json.dumps(obj, ensure_ascii=False)`` when ``obj`` is a dict, else None (no call)."""
    return json.dumps(obj, ensure_ascii=False) if isinstance(obj, dict) else None


def arguments_text(args: Any) -> str | None:
    """The arguments JSON text of a JSON call's ``"arguments"`` value, or None when it makes no
    call: a dict -> ``json.dumps(args, ensure_ascii=False)``; a string (the model serialized the
    arguments itself, as Granite 4 does) -> the object it holds when it is the JSON text of an
    object (vLLM ``Hermes2ProToolParser`` passes those through single-encoded), else the string's
    own JSON text (a string value is still a call: vLLM reports it, and the client receives valid
    JSON); anything else -> None."""
    if isinstance(args, dict):
        return json.dumps(args, ensure_ascii=False)
    if isinstance(args, str):
        try:
            inner = loads_or_too_deep(args)
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            return json.dumps(inner, ensure_ascii=False)
        return json.dumps(args, ensure_ascii=False)
    return None


def _ends(end_markers: str | tuple[str, ...]) -> tuple[str, ...]:
    return (end_markers,) if isinstance(end_markers, str) else end_markers


class Decided(NamedTuple):
    """A decided block: ``end`` is the index where the block ends (chars, in the parser's buffer):
    just after its end marker, or at it when the marker is not consumed.

    ``span`` is ``(start, end)`` of the JSON value in the buffer (chars) when the body is one
    complete JSON value followed only by whitespace and then an end marker, or by whitespace up
    to the end of the stream; else None (the body does not have that shape: the block is
    content up to ``end``). Whether the value makes a call (its type, its keys) is the parser's
    to judge.
    """

    end: int
    span: tuple[int, int] | None

    def value(self, buf: str) -> tuple[str, Any]:
        """``(raw JSON text, decoded value)`` of the span in ``buf``;
        :data:`~replay.parsers._jsonscan.TOO_DEEP` for a value nested too deeply, ``("",
        NO_VALUE)`` when there is no span."""
        if self.span is None:
            return "", NO_VALUE
        raw = buf[self.span[0] : self.span[1]]
        return raw, loads_or_too_deep(raw)


def _end_at(text: str, ends: tuple[str, ...], pos: int, consume: bool, final: bool) -> int | None:
    """Where a block that is no call ends: at (``consume``: just after) the first end marker at
    or after ``pos``, or the end of the text; None when there is none and more text may come."""
    e, mark = first_marker(text, ends, pos)
    if e < 0:
        return len(text) if final else None
    return e + len(mark) if consume else e


def read_json_block(
    text: str,
    body_start: int,
    end_markers: str | tuple[str, ...],
    *,
    consume: bool = True,
    trailing: Callable[[str], bool] | None = None,
    final: bool = True,
) -> tuple[int, Any] | None:
    """Decide the block whose body starts at ``body_start``: ``(end, value)``, or None.

    When the body is ws, one JSON value, ws and then one of ``end_markers`` (or ws to the end of
    the text), ``value`` is that value (``TOO_DEEP`` when it is nested too deeply) and ``end`` is
    after the marker (at it when not ``consume``), or the end of the text; otherwise ``value`` is
    :data:`NO_VALUE` and ``end`` is after (at) the first end marker after the value, after its
    start when it does not decode, or the end of the text.

    ``trailing(raw JSON text)``: when given and true for a value followed by other text (not ws
    then an end marker), the block ends just after the value (``end`` = its end, ``value`` the
    value) and that text is the caller's (content): Mistral's ``[TOOL_CALLS] [...]`` call list
    followed by prose.

    ``final``: ``text`` is the whole text (the whole-text parse, or the end of a stream). When
    False, ``text`` is a prefix of a stream and the result is None whenever more text could
    change it (the value or the marker may still be cut off; no end marker yet); any result
    given is the one the whole text gives (:class:`~replay.parsers._family.GrammarParser`).
    A value that does not decode is told from one cut off by :class:`JsonPrefix` (only then,
    and only on a prefix).
    """
    ends = _ends(end_markers)
    j = skip_ws(text, body_start)
    n = len(text)
    if j == n and not final:
        return None
    try:
        value, k = decode_at(text, j)
    except json.JSONDecodeError:
        if not final and JsonPrefix().feed(text[j:]) == MORE:
            return None  # a value cut off by the end of the prefix, not a bad one
        end = _end_at(text, ends, j, consume, final)
        return None if end is None else (end, NO_VALUE)
    m = skip_ws(text, k)
    if m == n:
        return (m, value) if final else None
    for e in ends:
        if text.startswith(e, m):
            return (m + len(e) if consume else m), value
    if not final and any(e.startswith(text[m:]) for e in ends):
        return None  # an end marker may be arriving
    if trailing is not None and trailing(text[j:k]):
        return k, value
    end = _end_at(text, ends, k, consume, final)
    return None if end is None else (end, NO_VALUE)


class JsonBlock:
    """Incremental decision on one block body: ws, a JSON value, ws, then an end marker.

    Takes ``end_markers`` (the text that closes the block; a tuple: whichever comes first),
    ``body_start`` (index in chars, in the parser's buffer, where the body begins: just after the
    start marker or separator) and ``consume``: True when the block includes its end marker (then
    ``end`` is just after it), False when the marker begins the next block (``end`` is at it).
    The parser then calls :meth:`advance` with its whole growing buffer (which must keep the
    block's text at the same indices: only appended to, never cut, until decided) and ``final``
    (True at the end of the stream). It returns None while undecided, else a :class:`Decided`:

    * the JSON value is complete and followed by ws and an end marker: ``end`` at/after the
      marker, ``span`` the value;
    * at ``final``, the value is complete and followed only by ws: ``end`` = ``len(buf)``, ``span``
      the value;
    * otherwise (only ws, or text that cannot be a JSON value, or other text after the value):
      ``span`` None and ``end`` at/after the first end marker after the value (after the value's
      start when it does not decode), or ``len(buf)`` at ``final`` when there is none.

    ``trailing``: as in :func:`read_json_block` (a value followed by other text ends the block
    just after the value when ``trailing(raw JSON text)`` is true).

    While undecided it keeps its scan state, so the JSON is scanned once, incrementally, and the
    end markers are searched for only in new text. Once it has decided it must not be called again.
    """

    def __init__(
        self,
        end_markers: str | tuple[str, ...],
        body_start: int,
        *,
        consume: bool = True,
        trailing: Callable[[str], bool] | None = None,
    ) -> None:
        self.ends = _ends(end_markers)
        self._trailing = trailing
        self._consume = consume
        self._longest = max(len(e) for e in self.ends)
        self._phase = "pre"
        self._scan = JsonPrefix()
        self._fed = body_start  # buffer index up to which the scanner has been fed
        self._j = body_start  # start of the JSON value in the buffer
        self._k = 0  # end of the JSON value in the buffer
        self._m = 0  # how far the whitespace after the value has been read
        self._seek = 0  # where to look for an end marker next

    def advance(self, buf: str, final: bool) -> Decided | None:
        """Move on over ``buf``; None while undecided, else the block's :class:`Decided`."""
        if self._phase == "pre":
            j = skip_ws(buf, self._j)
            if j == len(buf):
                self._j = j  # whitespace already read is never read again (linear in long runs)
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
                self._k = self._m = self._j + self._scan.end
                self._phase = "post"
            else:
                self._seek = self._j
                self._phase = "seek"
        if self._phase == "post":
            m = self._m = skip_ws(buf, self._m)
            for e in self.ends:
                if buf.startswith(e, m):
                    return Decided(m + len(e) if self._consume else m, (self._j, self._k))
            if m == len(buf):
                return Decided(len(buf), (self._j, self._k)) if final else None
            if not final and any(e.startswith(buf[m:]) for e in self.ends):
                return None
            if self._trailing is not None and self._trailing(buf[self._j : self._k]):
                return Decided(self._k, (self._j, self._k))
            self._seek = self._k
            self._phase = "seek"
        e, mark = first_marker(buf, self.ends, self._seek)
        if e < 0:
            if final:
                return Decided(len(buf), None)
            self._seek = max(self._seek, len(buf) - self._longest + 1)
            return None
        return Decided(e + len(mark) if self._consume else e, None)
