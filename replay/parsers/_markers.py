"""Finding a family's markers in text, whole or streamed (all positions and lengths in chars).

The streaming parsers emit text outside their blocks as soon as it cannot be the start of a
marker: :func:`find_marker` says where emitting must stop (at a marker, or before a suffix that is
a proper prefix of one, held back until the next delta decides it).
"""

from __future__ import annotations

from functools import lru_cache


def first_marker(text: str, markers: tuple[str, ...], start: int = 0, stop: int | None = None) -> tuple[int, str]:
    """``(index, marker)`` of the earliest occurrence of any of ``markers`` in ``text`` that starts
    in ``[start, stop)`` (``stop`` None: anywhere after ``start``); ``(-1, "")`` when there is none.
    At equal indices the marker listed first wins."""
    best, found = -1, ""
    for m in markers:
        # once a marker is found, the others are searched only up to it: a marker absent from a
        # long text is not searched to its end again for every block (linear in many calls)
        hi = stop if best < 0 else (best if stop is None else min(stop, best))  # starts in [start, hi)
        i = text.find(m, start) if hi is None else text.find(m, start, hi + len(m) - 1)
        if i >= 0 and (best < 0 or i < best):
            best, found = i, m
    return best, found


@lru_cache(maxsize=256)
def _proper_prefixes(markers: tuple[str, ...]) -> tuple[frozenset[str], int]:
    """Every proper prefix of ``markers`` and the longest one's length (computed once per tuple)."""
    prefixes = frozenset(m[:k] for m in markers for k in range(1, len(m)))
    return prefixes, max((len(p) for p in prefixes), default=0)


def partial_marker_suffix(buf: str, markers: tuple[str, ...]) -> int:
    """Length of the longest suffix of ``buf`` that is a proper prefix of one of ``markers``
    (one set look-up per candidate length: called on every delta)."""
    prefixes, longest = _proper_prefixes(markers)
    for k in range(min(len(buf), longest), 0, -1):
        if buf[-k:] in prefixes:
            return k
    return 0


def find_marker(buf: str, markers: tuple[str, ...], final: bool, start: int = 0) -> tuple[int, str]:
    """Where the text from ``start`` stops being plain text, for a streaming parser.

    ``(index, marker)`` of the first of ``markers`` at or after ``start``; when there is none,
    ``(cut, "")``: ``buf[start:cut]`` can be emitted, ``buf[cut:]`` (a suffix that may still become
    a marker) is held back, except at the end of the stream (``final``), where ``cut`` is the end.
    """
    i, mark = first_marker(buf, markers, start)
    if i >= 0:
        return i, mark
    if final:
        return len(buf), ""
    longest = max(len(m) for m in markers)
    return len(buf) - partial_marker_suffix(buf[max(start, len(buf) - longest + 1) :], markers), ""
