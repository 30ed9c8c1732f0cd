"""Finding a family's markers in text, whole or streamed (all positions and lengths in chars).

The streaming parsers emit text outside their blocks as soon as it cannot be the start of a
marker: :func:`find_marker` says where emitting must stop (at a marker, or before a suffix that is
a proper prefix of one, held back until the next delta decides it).
"""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=256)
def _alternation(markers: tuple[str, ...]) -> re.Pattern[str] | None:
    """A compiled ``m1|m2|...`` for markers that share a first character (computed once per
    tuple), else None. The regex engine scans for the shared prefix in C and tries the markers in
    the listed order at each candidate position, so a search is one call instead of one
    ``str.find`` per marker; markers without a shared first character are searched one by one
    (there the regex engine would try every position)."""
    if len(markers) < 2 or not all(markers) or len({m[0] for m in markers}) != 1:
        return None
    return re.compile("|".join(map(re.escape, markers)))


def first_marker(text: str, markers: tuple[str, ...], start: int = 0, stop: int | None = None) -> tuple[int, str]:
    """``(index, marker)`` of the earliest occurrence of any of ``markers`` in ``text`` that starts
    in ``[start, stop)`` (``stop`` None: anywhere after ``start``); ``(-1, "")`` when there is none.
    At equal indices the marker listed first wins."""
    if len(markers) == 1:
        m = markers[0]
        i = text.find(m, start) if stop is None else text.find(m, start, stop + len(m) - 1)
        return (i, m) if i >= 0 else (-1, "")
    rx = _alternation(markers)
    if rx is not None:
        got = rx.search(text, start) if stop is None else rx.search(text, start, stop + longest(markers) - 1)
        if got is None or (stop is not None and got.start() >= stop):
            return -1, ""
        return got.start(), got.group()
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
def _proper_prefixes(markers: tuple[str, ...]) -> tuple[frozenset[str], int, str]:
    """Every proper prefix of ``markers``, the longest one's length and the markers' distinct
    first characters (computed once per tuple)."""
    prefixes = frozenset(m[:k] for m in markers for k in range(1, len(m)))
    firsts = "".join(sorted({m[0] for m in markers if m}))
    return prefixes, max((len(p) for p in prefixes), default=0), firsts


@lru_cache(maxsize=256)
def _firsts(tokens: tuple[str, ...]) -> str:
    """The distinct first characters of ``tokens`` (computed once per tuple)."""
    return _proper_prefixes(tokens)[2] if tokens else ""


@lru_cache(maxsize=256)
def longest(markers: tuple[str, ...]) -> int:
    """The length of the longest of ``markers`` (1 when there are none; computed once per tuple)."""
    return max((len(m) for m in markers), default=1)


def partial_marker_suffix(buf: str, markers: tuple[str, ...], start: int = 0) -> int:
    """Length of the longest suffix of ``buf[start:]`` that is a proper prefix of one of
    ``markers``. Such a suffix starts with a marker's first character within the last (longest
    marker - 1) chars: only those positions are tried (one ``str.find`` per distinct first
    character, then a set look-up per occurrence; called on every delta)."""
    prefixes, longest_prefix, firsts = _proper_prefixes(markers)
    n = len(buf)
    lo = n - longest_prefix
    if lo < start:
        lo = start
    best = n
    for c in firsts:
        i = buf.find(c, lo, best)
        while i >= 0:
            if buf[i:] in prefixes:
                best = i
                break
            i = buf.find(c, i + 1, best)
    return n - best


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
    return len(buf) - partial_marker_suffix(buf, markers, start), ""


@lru_cache(maxsize=256)
def check_prefix_free(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """``tokens`` when no token is a prefix of another (so the leftmost occurrence in a text is
    one token, whole and streamed alike); raises ValueError naming the pair otherwise. Cached
    per tuple: every parser checks its end tokens when constructed, once per stream."""
    for a in tokens:
        for b in tokens:
            if a != b and b.startswith(a):
                raise ValueError(f"end token {a!r} is a prefix of {b!r}")
    return tokens


def strip_tokens(text: str, tokens: tuple[str, ...]) -> str:
    """``text`` without any occurrence of ``tokens`` (a family's end-of-turn / end-of-sequence
    tokens), removed in one left-to-right pass: text around a removed token is not read again,
    as a detokenizer that skips the token's id leaves its neighbours as they are. ``tokens`` must
    be prefix-free (:func:`check_prefix_free`)."""
    if not tokens:
        return text
    i, tok = first_marker(text, tokens, 0)
    if i < 0:
        return text  # the common text: no end token in it
    parts: list[str] = [text[:i]]
    pos = i + len(tok)
    while True:
        i, tok = first_marker(text, tokens, pos)
        if i < 0:
            parts.append(text[pos:])
            return "".join(parts)
        parts.append(text[pos:i])
        pos = i + len(tok)


class TokenStripper:
    """Streaming :func:`strip_tokens`: ``feed(delta)`` returns the text that can no longer be part
    of a token (a suffix that is a proper prefix of one is held back, so a token split across
    deltas is still removed), ``finish()`` the held-back rest. The joined output equals
    ``strip_tokens(joined input)`` for every chunking."""

    def __init__(self, tokens: tuple[str, ...]) -> None:
        self.tokens = check_prefix_free(tokens)
        self._firsts = _firsts(tokens)
        self._held = ""

    def feed(self, delta: str) -> str:
        """Take the next delta; return its text minus complete tokens, minus a held-back tail."""
        if not self.tokens:
            return delta
        if not self._held:
            firsts = self._firsts
            if (firsts not in delta) if len(firsts) == 1 else not any(c in delta for c in firsts):
                return delta  # no token can start here (the common delta): pass it through as is
        s = self._held + delta
        parts: list[str] = []
        pos = 0
        while True:
            i, tok = first_marker(s, self.tokens, pos)
            if i < 0:
                break
            parts.append(s[pos:i])
            pos = i + len(tok)
        keep = partial_marker_suffix(s[pos:], self.tokens)
        cut = len(s) - keep
        parts.append(s[pos:cut])
        self._held = s[cut:]
        return "".join(parts)

    def finish(self) -> str:
        """End of stream: the held-back text (a proper prefix of a token is not one)."""
        rest, self._held = self._held, ""
        return rest
