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
  run cannot hold one. The run is looked for with Hyperscan where it is installed (x86-64: a
  SIMD scan, a small part of what ``orjson.loads`` costs on the same text), else by one byte
  translation and a substring search; a text shorter than :data:`_SCAN_MIN` bytes always by the
  latter (no database to build for it). (A run inside a string or a float's fraction reads the
  text twice, to the same value.)
- :func:`dumps` is ``orjson.dumps``; a value holding such an ``int`` is written again with each of
  them as an ``orjson.Fragment`` of its decimal digits, so everything else keeps orjson's form.
"""

from __future__ import annotations

import json
import threading
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


#: Texts from this many bytes are scanned with Hyperscan when it is installed.
_SCAN_MIN = 2048
_SCANNER: Any = None  # (database, thread-local scratches) once built; False when Hyperscan is missing


def _scanner() -> Any:
    global _SCANNER
    if _SCANNER is None:
        try:
            import hyperscan
        except ImportError:  # not x86-64 (pyproject): the translation does it
            _SCANNER = False
        else:
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            db.compile(expressions=[b"[0-9]{%d}" % BIG_INT_DIGITS], ids=[0], elements=1,
                       flags=[hyperscan.HS_FLAG_SINGLEMATCH])
            _SCANNER = (db, threading.local(), hyperscan.Scratch)
    return _SCANNER


def _hit(_id: int, _start: int, _end: int, _flags: int, found: list) -> None:
    found.append(True)


def may_hold_big_int(data: bytes | bytearray | memoryview | str) -> bool:
    """True when the JSON text ``data`` (bytes, or str) holds a run of :data:`BIG_INT_DIGITS` or
    more ASCII digits, which every integer orjson reads as a float has; False proves it holds none."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if len(data) >= _SCAN_MIN and (scanner := _scanner()):
        db, local, scratch_of = scanner
        scratch = getattr(local, "scratch", None)
        if scratch is None:  # a scratch per thread: Hyperscan's is not shared by concurrent scans
            scratch = local.scratch = scratch_of(db)
        found: list = []
        db.scan(data, match_event_handler=_hit, context=found, scratch=scratch)  # any contiguous buffer, no copy
        return bool(found)
    if not isinstance(data, bytes):
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
