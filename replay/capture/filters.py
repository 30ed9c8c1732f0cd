"""Which exchanges of a capture a run keeps: ``--model``, ``--route``, ``--since`` / ``--until``,
``--sample`` / ``--sample-key`` and ``--limit`` of ``replay ingest`` and ``replay audit``.

A capture too big to audit whole is cut down at ingest, before anything is rendered or
re-streamed. A record that parses into an exchange and is filtered out is counted (not an error):
:attr:`replay.capture.ingest.IngestStats.filtered`, split by the first filter that dropped it in
``filtered_by``, so that ``lines - blank_lines - skipped - filtered == exchanges + errors``.

Sampling is deterministic: an exchange is kept when the SHA-256 of its sample key, read as a
number in [0, 1), is below the fraction. The same capture and fraction keep the same exchanges on
every machine, and a smaller fraction keeps a subset of what a larger one keeps. The key is the
exchange id by default; ``--sample-key request.metadata.session_id`` (any dotted path into the
request body) or a column of ``exchanges`` (``model``, ``route``, ``source_file`` ...) hashes that
value instead, so that a whole session stays in or out together. An exchange without that value
is sampled by its exchange id.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from replay import exactjson
from replay.capture.timestamps import TimestampError, parse_ts

__all__ = ["Filters", "FilterState", "sample_point", "describe_kept"]

#: ``filtered_by`` keys, in the order the filters are tried.
REASONS = ("model", "route", "no-ts", "since", "until", "sample", "limit")


def sample_point(key: str) -> float:
    """The place of ``key`` in [0, 1): the first 8 bytes of its UTF-8 SHA-256 as a big-endian
    integer over 2**64. An exchange is sampled when this is below the fraction."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


@dataclass(frozen=True)
class Filters:
    """What to keep (plain values; recorded in ``run.json``).

    ``models``: shell globs (``fnmatch``, case-sensitive) of which the model name must match one;
    ``routes``: route names (``chat.completions``, ``messages``, ``responses``) of which one must
    be the exchange's; ``since`` / ``until``: aware datetimes, ``since <= ts < until`` (an exchange
    without a readable ``ts`` is dropped as ``no-ts`` when either is given); ``sample``: fraction
    in (0, 1] kept by :func:`sample_point` of the key; ``sample_key``: ``exchange_id``, another
    column of ``exchanges``, or ``request.<dotted path>`` into the request body; ``limit``: keep at
    most this many exchanges (the first in reading order that pass the other filters).
    """

    models: tuple[str, ...] = ()
    routes: tuple[str, ...] = ()
    since: _dt.datetime | None = None
    until: _dt.datetime | None = None
    sample: float | None = None
    sample_key: str = "exchange_id"
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.sample is not None and not 0 < self.sample <= 1:
            raise ValueError(f"--sample {self.sample}: a fraction in (0, 1] (e.g. 0.1 or 10%)")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit {self.limit}: a number of exchanges >= 1")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError(f"--since {self.since.isoformat()} is not before --until {self.until.isoformat()}")

    @property
    def active(self) -> bool:
        """Whether any filter is set (without one, ingest keeps every exchange)."""
        return bool(self.models or self.routes or self.since or self.until or self.sample is not None or self.limit is not None)

    def options(self) -> dict[str, Any]:
        """The filters as JSON values for ``run.json`` (datetimes in ISO 8601)."""
        return {
            "models": list(self.models),
            "routes": list(self.routes),
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "sample": self.sample,
            "sample_key": self.sample_key,
            "limit": self.limit,
        }

    def drop_reason(self, row: dict[str, Any]) -> str | None:
        """The first of :data:`REASONS` that drops the exchange ``row`` (an ``exchanges`` row as
        :func:`replay.capture.v1.parse_line` makes it), None when every filter but ``limit``
        keeps it (``limit`` is counted by :class:`FilterState`)."""
        if self.models and not any(fnmatch.fnmatchcase(row.get("model") or "", g) for g in self.models):
            return "model"
        if self.routes and (row.get("route") or "") not in self.routes:
            return "route"
        if self.since is not None or self.until is not None:
            try:
                ts = parse_ts(row.get("ts"))
            except TimestampError:
                return "no-ts"
            if self.since is not None and ts < self.since:
                return "since"
            if self.until is not None and ts >= self.until:
                return "until"
        if self.sample is not None and self.sample < 1 and sample_point(self.key_of(row)) >= self.sample:
            return "sample"
        return None

    def key_of(self, row: dict[str, Any]) -> str:
        """The text hashed for sampling: the ``sample_key`` value as JSON text (a string as it is),
        or the exchange id when the row has no such value."""
        value: Any = None
        if self.sample_key.startswith("request."):
            try:
                value = exactjson.loads(row.get("request_json") or "null")
            except orjson.JSONDecodeError:
                value = None
            for part in self.sample_key[len("request.") :].split("."):
                value = value.get(part) if isinstance(value, dict) else None
        else:
            value = row.get(self.sample_key)
        if value is None:
            return str(row.get("exchange_id"))
        return value if isinstance(value, str) else exactjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


@dataclass
class FilterState:
    """The filters applied over one ingest: counts of what was kept and dropped, and ``limit``."""

    filters: Filters
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    def keep(self, row: dict[str, Any]) -> bool:
        """Whether to write ``row``; counts it either way."""
        reason = self.filters.drop_reason(row)
        if reason is None and self.filters.limit is not None and self.kept >= self.filters.limit:
            reason = "limit"
        if reason is None:
            self.kept += 1
            return True
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        return False

    @property
    def seen(self) -> int:
        """Exchanges the filters looked at (kept + dropped)."""
        return self.kept + sum(self.dropped.values())


def describe_kept(options: dict[str, Any], kept: int, seen: int, no_ts: int = 0) -> str:
    """One sentence on what the filters kept, from ``run.json``'s ``filters`` options:
    ``"sampled 10%: 12,345 of 123,456 exchanges; model Qwen/*"``. ``kept`` / ``seen``: exchanges
    written / exchanges the filters looked at. ``no_ts``: exchanges dropped because ``--since`` or
    ``--until`` was given and they have no readable timestamp (``filtered_by["no-ts"]``); when
    non-zero the sentence ends ``"; 4 dropped for having no timestamp"``, so that a time window
    never drops them unsaid."""
    parts = []
    sample = options.get("sample")
    head = f"{kept:,} of {seen:,} exchanges"
    if sample is not None and sample < 1:
        by = options.get("sample_key") or "exchange_id"
        head = f"sampled {_percent(sample)}" + ("" if by == "exchange_id" else f" by {by}") + f": {head}"
    else:
        head = f"kept {head}"
    if options.get("models"):
        parts.append("model " + ", ".join(options["models"]))
    if options.get("routes"):
        parts.append("route " + ", ".join(options["routes"]))
    if options.get("since"):
        parts.append(f"since {options['since']}")
    if options.get("until"):
        parts.append(f"until {options['until']}")
    if options.get("limit") is not None:
        parts.append(f"at most {options['limit']:,}")
    if no_ts:
        parts.append(f"{no_ts:,} dropped for having no timestamp")
    return "; ".join([head, *parts])


def _percent(fraction: float) -> str:
    text = f"{fraction * 100:.6f}".rstrip("0").rstrip(".")
    return f"{text}%"


_FRACTION = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(%?)\s*")


def parse_fraction(text: str) -> float:
    """``--sample``: ``0.1`` or ``10%`` -> 0.1. Raises ValueError unless it is in (0, 1]."""
    m = _FRACTION.fullmatch(text or "")
    if not m:
        raise ValueError(f"{text!r} is not a fraction in (0, 1] (e.g. 0.1 or 10%)")
    value = float(m.group(1)) / (100 if m.group(2) else 1)
    if not 0 < value <= 1:
        raise ValueError(f"{text!r} is not a fraction in (0, 1] (e.g. 0.1 or 10%)")
    return value
