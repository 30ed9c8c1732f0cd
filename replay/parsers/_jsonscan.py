"""Incremental scan of one JSON value, accepting exactly what Python's ``json`` module accepts.

The streaming parsers use :class:`JsonPrefix` to learn, as deltas arrive, whether the text after
a call's start marker is still a possible prefix of a JSON value (wait), has become one complete
value (and where it ends), or can no longer be one (the block is not a call). The whole-text parses
do not use it to find a value's extent: they call :func:`decode_at` (``json.JSONDecoder().raw_decode``).
Keeping the two independent is what lets the stream-equals-whole property test check one against
the other. Both sides then decode a value with the same depth rule:

**Nesting depth.** Python's ``json`` recurses once per nesting level and raises ``RecursionError``
at a depth that depends on how deep the caller's stack already is (and on the Python version), so
"too deep for ``json``" is no rule two code paths can agree on. Every parser therefore decodes a
value through :func:`decode_at` (whole text) or :func:`loads_or_too_deep` (a value's text, as the
streaming side finds it), which give :data:`TOO_DEEP` for a value whose nesting depth (arrays and
objects on the deepest path; a scalar has depth 0) exceeds :data:`MAX_DEPTH`, whatever the stack.
A value nested too deep is never a call: its text is content by the family's rule. The parsers'
own value readers (Pythonic literals, Gemma 4 arguments) apply the same limit to the values they
build. :class:`JsonPrefix` keeps an explicit stack and has no depth limit.

Grammar: as CPython's C scanner (``json.loads`` with ``strict=True``): whitespace is space, tab,
LF, CR; strings reject control characters below U+0020 and accept the escapes ``\\" \\\\ \\/ \\b \\f
\\n \\r \\t \\uXXXX``; numbers follow ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?`` matched
greedily with backtracking (so ``1.`` at top level is the number ``1`` followed by ``.``); the
literals ``null true false NaN Infinity -Infinity`` are accepted.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_WS = " \t\n\r"
_DIGITS = "0123456789"
_HEX = frozenset("0123456789abcdefABCDEF")
_LITERALS = {"n": "null", "t": "true", "f": "false", "N": "NaN", "I": "Infinity"}
_PLAIN_STRING_RUN = re.compile(r'[^"\\\x00-\x1f]*')

MORE = "more"
DONE = "done"
INVALID = "invalid"


def skip_ws(text: str, pos: int) -> int:
    """Index of the first character at or after ``pos`` that is not JSON whitespace (chars)."""
    n = len(text)
    while pos < n and text[pos] in _WS:
        pos += 1
    return pos


class JsonPrefix:
    """Feed text in pieces; learn whether it starts with one complete JSON value.

    ``feed(text) -> status`` and ``close() -> status`` (end of input) return ``"more"`` (a valid
    prefix, incomplete), ``"done"`` (one value is complete; :attr:`end` is the index just after it,
    in chars from the start of the first feed; text after it is not examined) or ``"invalid"``
    (no extension of the text is a JSON value). Leading whitespace is skipped.
    """

    def __init__(self) -> None:
        self.status = MORE
        self.end: int | None = None
        self._base = 0  # chars consumed by previous feeds
        self._stack: list[str] = []
        self._mode = "value"
        self._allow_close = False
        self._is_key = False
        self._sub = ""  # number sub-state
        self._good_end = 0  # number: end of the longest complete number seen (for backtracking)
        self._lit = ""
        self._lit_pos = 0
        self._hex_left = 0

    def _value_done(self, end: int) -> None:
        if not self._stack:
            self.status = DONE
            self.end = end
        else:
            self._mode = "after"

    def feed(self, text: str) -> str:
        """Scan ``text`` (the next piece of input); return the status."""
        if self.status != MORE:
            return self.status
        base = self._base
        i = 0
        n = len(text)
        while i < n and self.status == MORE:
            c = text[i]
            mode = self._mode
            if mode == "str":
                m = _PLAIN_STRING_RUN.match(text, i)
                i = m.end()
                if i >= n:
                    break
                c = text[i]
                if c == '"':
                    if self._is_key:
                        self._mode = "colon"
                    else:
                        self._value_done(base + i + 1)
                elif c == "\\":
                    self._mode = "esc"
                else:  # a control character
                    self.status = INVALID
                i += 1
            elif mode == "esc":
                if c in '"\\/bfnrt':
                    self._mode = "str"
                elif c == "u":
                    self._mode = "hex"
                    self._hex_left = 4
                else:
                    self.status = INVALID
                i += 1
            elif mode == "hex":
                if c in _HEX:
                    self._hex_left -= 1
                    if self._hex_left == 0:
                        self._mode = "str"
                else:
                    self.status = INVALID
                i += 1
            elif mode == "num":
                sub = self._sub
                if c in _DIGITS:
                    if sub == "minus":
                        self._sub = "zero" if c == "0" else "int"
                    elif sub == "zero":
                        self._end_number(base + i)
                        continue  # re-read c in the new mode
                    elif sub == "frac0":
                        self._sub = "frac"
                    elif sub in ("exp0", "expsign"):
                        self._sub = "exp"
                    i += 1
                elif c == "." and sub in ("zero", "int"):
                    self._good_end = base + i
                    self._sub = "frac0"
                    i += 1
                elif c in "eE" and sub in ("zero", "int", "frac"):
                    self._good_end = base + i
                    self._sub = "exp0"
                    i += 1
                elif c in "+-" and sub == "exp0":
                    self._sub = "expsign"
                    i += 1
                elif c == "I" and sub == "minus":
                    self._mode = "lit"
                    self._lit = "-Infinity"
                    self._lit_pos = 2
                    i += 1
                else:
                    self._end_number(base + i)
                    # continue with c in the new mode (if still scanning)
            elif mode == "lit":
                if c == self._lit[self._lit_pos]:
                    self._lit_pos += 1
                    if self._lit_pos == len(self._lit):
                        self._value_done(base + i + 1)
                else:
                    self.status = INVALID
                i += 1
            elif c in _WS:
                i += 1
            elif mode == "value":
                if c == '"':
                    self._mode = "str"
                    self._is_key = False
                elif c == "{":
                    self._stack.append("{")
                    self._mode = "key"
                    self._allow_close = True
                    i += 1
                    continue
                elif c == "[":
                    self._stack.append("[")
                    self._mode = "value"
                    self._allow_close = True
                    i += 1
                    continue
                elif c == "]" and self._allow_close:
                    self._stack.pop()
                    self._value_done(base + i + 1)
                elif c in _LITERALS:
                    self._mode = "lit"
                    self._lit = _LITERALS[c]
                    self._lit_pos = 1
                elif c == "-":
                    self._mode = "num"
                    self._sub = "minus"
                elif c in _DIGITS:
                    self._mode = "num"
                    self._sub = "zero" if c == "0" else "int"
                else:
                    self.status = INVALID
                self._allow_close = False
                i += 1
            elif mode == "key":
                if c == '"':
                    self._mode = "str"
                    self._is_key = True
                elif c == "}" and self._allow_close:
                    self._stack.pop()
                    self._value_done(base + i + 1)
                else:
                    self.status = INVALID
                self._allow_close = False
                i += 1
            elif mode == "colon":
                if c == ":":
                    self._mode = "value"
                    self._allow_close = False
                else:
                    self.status = INVALID
                i += 1
            else:  # "after": a value inside a container is complete
                top = self._stack[-1]
                if c == ",":
                    self._mode = "key" if top == "{" else "value"
                    self._allow_close = False
                elif (c == "}" and top == "{") or (c == "]" and top == "["):
                    self._stack.pop()
                    self._value_done(base + i + 1)
                else:
                    self.status = INVALID
                i += 1
        self._base = base + n
        return self.status

    def _end_number(self, at: int) -> None:
        """The number being read cannot take the character at ``at``: close it."""
        sub = self._sub
        if sub == "minus":
            self.status = INVALID
        elif sub in ("zero", "int", "frac", "exp"):
            self._value_done(at)
        elif not self._stack:  # "1." or "1e" or "1e+": the number is the part before
            self._value_done(self._good_end)
        else:  # inside a container the '.'/'e' after the number is a syntax error
            self.status = INVALID

    def close(self) -> str:
        """Signal end of input; return the final status (``done`` or ``invalid``)."""
        if self.status == MORE:
            if self._mode == "num" and not self._stack:
                self._end_number(self._base)
            else:
                self.status = INVALID
            if self.status == MORE:  # pragma: no cover - _end_number always decides at top level
                self.status = INVALID
        return self.status


# ------------------------------------------------------------------------- decoding with a depth limit
#: The deepest nesting (arrays and objects on one path) of a value the parsers decode; deeper values
#: are :data:`TOO_DEEP`. Far below what ``json`` and the recursive readers manage from any stack.
MAX_DEPTH = 128

_DECODER = json.JSONDecoder()


class _TooDeep:
    """The type of :data:`TOO_DEEP`."""

    def __repr__(self) -> str:
        return "TOO_DEEP"


#: Stands for a complete JSON value nested deeper than :data:`MAX_DEPTH`; it is no JSON kind, so
#: every call check (``isinstance(obj, dict)`` ...) rejects it.
TOO_DEEP: Any = _TooDeep()


def deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when the decoded ``value`` has more than ``limit`` nested lists/dicts on one path
    (no recursion)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if items is None:
            continue
        if d > limit:
            return True
        stack.extend((x, d + 1) for x in items if isinstance(x, (dict, list)))
    return False


def _has_non_finite(value: Any) -> bool:
    """True when ``value`` holds a float that is NaN or infinite (iterative walk)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float):
            if not math.isfinite(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


#: ``json.dumps(value, ensure_ascii=False)`` (the arguments text of the families' calls), the
#: encoder built once: ``json.dumps`` with any non-default option builds a new ``JSONEncoder`` per
#: call (a large share of the call); the encoder keeps no state between calls, so the text is identical.
dumps_arguments = json.JSONEncoder(ensure_ascii=False).encode


def _checked(value: Any, text: str, j: int, k: int) -> Any:
    """``value`` (decoded from ``text[j:k]``), or :data:`TOO_DEEP` when it is no usable JSON value:
    nested too deeply, or holding ``NaN`` / ``Infinity`` / a number that overflows to infinity
    (Python's ``json`` reads them; JSON has none, and the arguments could not be written back as
    JSON: no call, as for a value that does not decode)."""
    # a value cannot be nested deeper than it has opening brackets: skip the walk in the usual case
    if text.count("[", j, k) + text.count("{", j, k) > MAX_DEPTH and deeper_than(value):
        return TOO_DEEP
    # the walk itself, always: a prefilter on the text cost more than the walk (a regex of the
    # constants, exponents and 309-digit runs took several times the walk on a typical call),
    # and the earlier one ([NIeE]: matched by the "e" of "name" in every call) missed
    # a 309-digit number with a fraction and no exponent (overflowing to infinity) in a text without
    # those letters (a bare value: an arguments string, a Pythonic argument)
    if _has_non_finite(value):
        return TOO_DEEP
    return value


def _scanned_end(text: str, j: int) -> int | None:
    """End (chars) of the complete JSON value at ``text[j]``, by :class:`JsonPrefix`; None if none."""
    scan = JsonPrefix()
    status = scan.feed(text[j:] if j else text)
    if status == MORE:
        status = scan.close()
    return j + scan.end if status == DONE and scan.end is not None else None


def decode_at(text: str, j: int, decoder: json.JSONDecoder = _DECODER) -> tuple[Any, int]:
    """``decoder.raw_decode(text, j)`` (default ``json.JSONDecoder()``) with the depth rule:
    ``(value, end index)`` (chars), the value :data:`TOO_DEEP` when it is complete but nested
    deeper than :data:`MAX_DEPTH`. Raises ``json.JSONDecodeError`` when no JSON value starts at
    ``j``."""
    try:
        value, k = decoder.raw_decode(text, j)
    except RecursionError:
        k = _scanned_end(text, j)
        if k is None:
            raise json.JSONDecodeError("unterminated deeply nested value", text, j) from None
        return TOO_DEEP, k
    return _checked(value, text, j, k), k


def loads_or_too_deep(raw: str) -> Any:
    """``json.loads(raw)`` with the depth rule, for ``raw`` the text of one complete JSON value
    (as the streaming side's :class:`JsonPrefix` found it): the value, or :data:`TOO_DEEP` when it
    is nested deeper than :data:`MAX_DEPTH`. (Text that is not one complete value raises
    ``json.JSONDecodeError``, or may give :data:`TOO_DEEP` when deeply nested: either way no call.
    To tell the two apart use :func:`decode_at`.)"""
    try:
        value = json.loads(raw)
    except RecursionError:
        return TOO_DEEP
    return _checked(value, raw, 0, len(raw))
