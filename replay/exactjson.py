"""JSON that keeps integers exact: orjson's speed, and the client's digits where orjson drops them.

orjson reads an integer outside the 64-bit range (below ``-2**63`` or from ``2**64``) as a float
(``12345678901234567890123456789`` becomes ``1.2345678901234568e+28``) and refuses to write a
Python ``int`` outside it (``JSONEncodeError: Integer exceeds 64-bit range``). RFC 8259 section 6
sets no limit on a number's digits, and a client may send such an integer in a tool schema
(``"maximum": 1234567890123456789012345``), message content or tool-call arguments; a capture
reader that rounds it changes the request the reference renders.

- :func:`loads` is ``orjson.loads``, and reads the text again with the stdlib :mod:`json` module
  (which makes every integer an exact ``int``) only when the text holds a run of 19 or more ASCII
  digits: an integer outside the 64-bit range has at least 19 digits, so a text without such a
  run cannot hold one, and the common text pays one byte translation and a substring search.
  (A run inside a string or a float's fraction reads the text twice, to the same value.)
- :func:`dumps` is ``orjson.dumps``; a value holding such an ``int`` is written again with each of
  them as an ``orjson.Fragment`` of its decimal digits, so everything else keeps orjson's form.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["BIG_INT_DIGITS", "dumps", "loads", "may_hold_big_int"]

#: Fewest digits of an integer orjson cannot read exactly: ``-2**63 - 1`` has 19.
BIG_INT_DIGITS = 19

# every ASCII digit -> "0", every other byte -> " ": a run of BIG_INT_DIGITS digits is a substring
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_RUN = b"0" * BIG_INT_DIGITS
_INT64_MIN = -(1 << 63)
_UINT64_END = 1 << 64


def may_hold_big_int(data: bytes | bytearray | memoryview | str) -> bool:
    """True when the JSON text ``data`` (bytes, or str) holds a run of :data:`BIG_INT_DIGITS` or
    more ASCII digits, which every integer orjson reads as a float has; False proves it holds none."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    elif not isinstance(data, bytes):
        data = bytes(data)
    return _RUN in data.translate(_DIGITS)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """The JSON value of ``data`` (UTF-8 bytes, or str), as ``orjson.loads`` returns it except that
    every integer is an exact ``int`` (module docstring). Raises ``orjson.JSONDecodeError`` exactly
    when ``orjson.loads`` does (orjson decides what is valid JSON). A text the stdlib cannot read
    again (nested past its recursion limit) keeps orjson's value."""
    value = orjson.loads(data)
    if not may_hold_big_int(data):
        return value
    text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    try:
        return json.loads(text)
    except (RecursionError, ValueError):
        return value


def _is_big(value: Any) -> bool:
    return type(value) is int and not _INT64_MIN <= value < _UINT64_END


def _fragments(value: Any) -> Any:
    """``value`` with every ``int`` outside the 64-bit range (at any depth of dicts, lists and
    tuples) replaced by an ``orjson.Fragment`` of its digits."""
    if type(value) is dict:
        return {k: _fragments(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return [_fragments(v) for v in value]
    if _is_big(value):
        return orjson.Fragment(str(value).encode("ascii"))
    return value


def dumps(value: Any, option: int | None = None, default: Any = None) -> bytes:
    """``orjson.dumps(value, option=option, default=default)``, with every Python ``int`` outside
    the 64-bit range written as its exact digits (where orjson raises). Raises
    ``orjson.JSONEncodeError`` (a ``TypeError``) as ``orjson.dumps`` does for anything else (a value
    that is not JSON, nesting past 254 levels)."""
    try:
        return orjson.dumps(value, default, option)
    except orjson.JSONEncodeError as exc:
        if "64-bit" not in str(exc):
            raise
    return orjson.dumps(_fragments(value), default, option)
