"""One reading of a capture's timestamp (``exchanges.ts``), for ``--since`` / ``--until`` and for
anything else that needs ``ts`` as an instant.

Captures write time in several forms: ISO 8601 text (v1, HAR's ``startedDateTime``, LiteLLM's
``startTime``), epoch seconds as a number or as text (v1, server logs), and OTel's nanoseconds
(divided to seconds by the reader). :func:`parse_ts` reads every one of them to an aware
``datetime`` in UTC; it is the one place that rule lives.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

__all__ = ["parse_ts", "TimestampError"]

_EPOCH = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


class TimestampError(ValueError):
    """A value that is neither ISO 8601 text nor epoch seconds/milliseconds."""


def parse_ts(value: Any) -> _dt.datetime:
    """``value`` as an aware ``datetime`` in UTC.

    Accepts a ``datetime`` (naive ones are taken as UTC), a ``date`` (its midnight, UTC), a number
    or numeric text of epoch time, and ISO 8601 text as ``datetime.fromisoformat`` reads it
    (Python 3.11: ``2025-01-01``, ``2025-01-01T10:00:00Z``, ``2025-01-01 10:00:00.123+02:00``;
    text without an offset is UTC). Epoch numbers are seconds; a magnitude above 1e11 (after the
    year 5138 in seconds) is read as milliseconds, above 1e14 as microseconds, above 1e17 as
    nanoseconds, the units loggers use. Raises :class:`TimestampError` for anything else (None,
    empty text, a bool, text that is neither form, an instant out of ``datetime``'s range).
    """
    if isinstance(value, _dt.datetime):
        return value.replace(tzinfo=_dt.timezone.utc) if value.tzinfo is None else value.astimezone(_dt.timezone.utc)
    if isinstance(value, _dt.date):
        return _dt.datetime(value.year, value.month, value.day, tzinfo=_dt.timezone.utc)
    if isinstance(value, bool) or value is None:
        raise TimestampError(f"not a timestamp: {value!r}")
    if isinstance(value, (int, float)):
        return _from_epoch(float(value), value)
    if not isinstance(value, str) or not value.strip():
        raise TimestampError(f"not a timestamp: {value!r}")
    text = value.strip()
    if _EPOCH.fullmatch(text):
        return _from_epoch(float(text), value)
    iso = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text
    try:
        got = _dt.datetime.fromisoformat(iso)
    except ValueError:
        raise TimestampError(f"not ISO 8601 or epoch seconds: {value!r}") from None
    return got.replace(tzinfo=_dt.timezone.utc) if got.tzinfo is None else got.astimezone(_dt.timezone.utc)


def _from_epoch(seconds: float, shown: Any) -> _dt.datetime:
    for limit, scale in ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3)):
        if abs(seconds) >= limit:
            seconds /= scale
            break
    try:
        return _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise TimestampError(f"epoch time out of range: {shown!r}") from None
