"""What every reader yields: :class:`Unit`, one counted record of a capture file.

A unit is one *record* in the accounting of :mod:`replay.capture.ingest` (``lines`` counts units):
a JSON line for the line-based formats, one exchange of an SSE transcript, a body file, a HAR
entry, an OTel span, a Batch input line (with its joined output line). Each unit is exactly one of:

- an exchange: ``record`` is a dict in the form of a capture-v1 line (``route``, ``model``,
  ``request``, ``response`` or ``stream``, ``server``, and ``capture_lacks``), turned into rows by
  :func:`replay.capture.v1.parse_record` in ingest: the one place every format's rows are made, so a
  common step (redaction) placed there sees every reader's records. Whatever a capture held besides
  the exchange (HTTP headers, gateway metadata) travels in ``record["headers"]`` /
  ``record["metadata"]`` and is never written to a table;
- a v1 line (``v1_raw``): ingest parses ``raw`` with :func:`replay.capture.v1.parse_line`;
- an error: ``error`` is a :class:`replay.capture.v1.CaptureError`;
- ``blank`` (whitespace only) or ``skipped`` (a record that is not an LLM exchange: a HAR entry to
  another URL, an OTel span that is not a model call or holds no content; its reason, when the
  reader gives one, in ``skip_reason``): neither an exchange nor an error.

Hence, per run: ``lines - blank_lines - skipped == exchanges + errors``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from replay import exactjson
from replay.capture.v1 import CaptureError

__all__ = ["Skip", "Unit", "exchange", "failed", "lines_and_records", "request_from_body"]


@dataclass(frozen=True)
class Skip:
    """What a reader's mapping returns for a record that is not an LLM exchange, with the reason it
    is not (counted per reason in :attr:`replay.capture.ingest.IngestStats.skipped_by`; e.g.
    ``"otel: gen_ai.operation.name execute_tool is not a model call"``)."""

    reason: str


@dataclass
class Unit:
    """One counted record. ``line``: 1-based line (or entry / span number: see each reader) in
    ``source``; ``offset``: byte offset of the record in the decompressed file, when known;
    ``raw``: bytes for the error excerpt (or the v1 line); ``source``: the file the record came
    from when not the file being read (a Batch output line). Exactly one of ``record``, ``error``,
    ``v1_raw``, ``blank``, ``skipped`` applies. ``skip_reason``: why a ``skipped`` unit is not an
    exchange, when its reader says."""

    line: int | None
    offset: int | None
    raw: bytes = b""
    record: dict[str, Any] | None = None
    error: CaptureError | None = None
    v1_raw: bool = False
    blank: bool = False
    skipped: bool = False
    source: str | None = None
    skip_reason: str | None = None


def exchange(line: int | None, offset: int | None, record: dict[str, Any], raw: bytes = b"", source: str | None = None) -> Unit:
    """A unit holding an exchange record."""
    return Unit(line, offset, raw, record=record, source=source)


def failed(line: int | None, offset: int | None, reason: str, detail: str, raw: bytes = b"", source: str | None = None) -> Unit:
    """A unit holding an error (``reason`` goes to ``ingest_errors.reason``)."""
    return Unit(line, offset, raw, error=CaptureError(reason, detail), source=source)


def lines_and_records(records: int, shared_line_records: int) -> str:
    """How much was read, as :class:`IngestStats` counts it: ``"45 lines"`` when every record had a
    line of its own, else ``"44 lines, 45 records"`` (``records``: :attr:`IngestStats.lines`;
    ``shared_line_records``: :attr:`IngestStats.shared_line_records`)."""
    def n(count: int, noun: str) -> str:
        return f"{count:,} {noun}{'' if count == 1 else 's'}"

    if not shared_line_records:
        return n(records, "line")
    return f"{n(records - shared_line_records, 'line')}, {n(records, 'record')}"


def request_from_body(body: str | bytes | None, where: str) -> tuple[Any, list[str]]:
    """The request a logged HTTP body holds (a HAR's ``request.postData.text``, a mitmproxy flow's
    ``request.content``): ``(request, lacks)``, ``request`` the decoded JSON object (integers kept
    exact: :mod:`replay.exactjson`) and ``lacks`` empty; for an empty or missing body ``({},
    ["request"])``. ``where``: the field's name in error messages. Raises :class:`CaptureError`
    ``bad-json`` for a body that is not JSON, ``request-not-object`` for one that is not an object."""
    if body is None or not body.strip():
        return {}, ["request"]
    try:
        request = exactjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise CaptureError("bad-json", f"{where} is not JSON: {exc}") from None
    if not isinstance(request, dict):
        raise CaptureError("request-not-object", f"{where} is not a JSON object")
    return request, []
