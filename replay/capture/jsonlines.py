"""The loop shared by the JSON-lines readers (server logs, LiteLLM rows, OTel exports, Batch files).

:func:`read_json_lines` streams a file's lines (plain or compressed, :func:`open_lines`), decodes
each with :func:`replay.capture.v1.decode_line` and hands the object to a pure mapping function
``to_records(obj) -> list`` (v1-form records; None for a record that is not an exchange; a
:class:`CaptureError` for one that failed). Units: a blank line is ``blank``; a line that does not
decode, or whose mapping raises :class:`CaptureError` (or any other exception: reason
``internal-error``), is one error at that line; a line mapping to
an empty list is one ``skipped``; a line mapping to N items gives N units at that line (an OTLP
export line holding several spans), None and :class:`Skip` items ``skipped`` (the latter with its reason). A ``{...}`` document spread over several lines (a
pretty-printed export) is not JSON lines: it is read whole, at most :data:`WHOLE_MAX_BYTES`, as
one record at line 1; with ``arrays``, a document that is a JSON array (an export written as one
``[...]``) is read whole too, each item one record numbered by its position from 1 (a truncated
array is one ``bad-json`` error at line 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson

from replay.capture.detect import open_binary
from replay.capture.files import LongLine, open_lines
from replay.capture.records import Skip, Unit, exchange, failed
from replay.capture.v1 import CaptureError, decode_line

__all__ = ["WHOLE_MAX_BYTES", "decoded_lines", "mapped_units", "read_json_lines", "read_whole"]

#: Largest pretty-printed JSON document read whole (bytes, decompressed).
WHOLE_MAX_BYTES = 256 << 20


def decoded_lines(
    lines: Iterable[tuple[int, int, bytes]], source: str | None = None
) -> Iterator[tuple[int, int, bytes, Any]]:
    """The JSON-lines loop shared by every reader of one JSON value a line: takes ``(line, offset,
    raw)`` from :func:`open_lines` and yields ``(line, offset, raw, obj)``, ``obj`` being the
    decoded value, or a finished :class:`Unit` (``blank`` for a blank line, ``error`` for a line
    that :func:`decode_line` rejects) tagged with ``source``."""
    for line, offset, raw in lines:
        if not raw.strip():
            yield line, offset, raw, Unit(line, offset, raw, blank=True, source=source)
            continue
        try:
            yield line, offset, raw, decode_line(raw)
        except CaptureError as exc:
            yield line, offset, raw, Unit(line, offset, raw, error=exc, source=source)


def mapped_units(line: int, offset: int | None, raw: bytes, obj: Any, to_records: Callable[[Any], list[dict]]) -> Iterator[Unit]:
    """The units of one decoded record ``obj`` at ``line`` / ``offset`` mapped by ``to_records``
    (rules: module docstring): its records, ``skipped`` for None or an empty list, an error unit for
    a :class:`CaptureError` (returned or raised) or any other exception (``internal-error``).
    ``raw``: the excerpt bytes of every unit."""
    try:
        recs = to_records(obj)
    except CaptureError as exc:
        yield Unit(line, offset, raw, error=exc)
        return
    except Exception as exc:  # noqa: BLE001 - a fault of the mapping must not stop the run
        yield Unit(line, offset, raw, error=CaptureError("internal-error", f"{type(exc).__name__}: {exc}"))
        return
    if not recs:
        yield Unit(line, offset, raw, skipped=True)
        return
    for rec in recs:
        if rec is None:  # a record of the file that is not an exchange (an OTel span without gen_ai.*)
            yield Unit(line, offset, raw, skipped=True)
        elif isinstance(rec, Skip):  # the same, with the reader's reason
            yield Unit(line, offset, raw, skipped=True, skip_reason=rec.reason)
        elif isinstance(rec, CaptureError):
            yield Unit(line, offset, raw, error=rec)
        else:
            yield exchange(line, offset, rec, raw)


def read_whole(path: Path, limit: int, too_large: str, on_read: Callable[[int], None] | None = None) -> bytes | Unit:
    """The decompressed bytes of ``path`` (a document read whole), or an error unit at line 1:
    ``corrupt-stream`` when it cannot be read or decompressed, ``too-large`` (detail
    ``too_large``, excerpt its first 200 bytes) when it holds more than ``limit`` bytes."""
    try:
        with open_binary(path, on_read) as fh:
            data = fh.read(limit + 1)
    except Exception as exc:  # noqa: BLE001 - zstd/gzip faults of every kind
        return failed(1, 0, "corrupt-stream", f"{type(exc).__name__}: {exc}")
    if len(data) > limit:
        return failed(1, 0, "too-large", too_large, data[:200])
    return data


def _first_line_is_whole(path: Path, arrays: bool = False) -> bool:
    """True when the first non-blank line of the file is not a JSON value by itself but starts a
    document (``{`` or ``[``): the file is pretty-printed; with ``arrays``, also when it starts a
    JSON array (one ``[...]`` document, on one line or many)."""
    for _line, _off, raw in open_lines(path):
        if isinstance(raw, LongLine):  # over --max-line-bytes: a line to skip, not a document to read whole
            return False
        s = raw.strip()
        if not s:
            continue
        if arrays and s[:1] == b"[":
            return True
        if s[:1] not in (b"{", b"["):
            return False
        try:
            orjson.loads(s)
            return False
        except orjson.JSONDecodeError:
            return True
    return False


def read_json_lines(
    path: Path, to_records: Callable[[Any], list[dict]], on_read: Callable[[int], None] | None = None, arrays: bool = False
) -> Iterator[Unit]:
    """Units of a JSON-lines capture file mapped by ``to_records`` (rules: module docstring;
    ``arrays``: read a JSON-array document item by item). Stream faults of a compressed file
    propagate as :class:`replay.capture.files.StreamFault`."""
    try:
        whole = _first_line_is_whole(path, arrays)
    except Exception:  # noqa: BLE001 - the line reader below reports the fault
        whole = False
    if whole:
        data = read_whole(path, WHOLE_MAX_BYTES, f"a pretty-printed document is read whole: more than {WHOLE_MAX_BYTES} bytes; write it as JSON lines", on_read)
        if isinstance(data, Unit):
            yield data
            return
        if arrays and data.lstrip()[:1] == b"[":
            try:
                items = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                yield Unit(1, 0, data[:200], error=CaptureError("bad-json", f"a JSON array document: {exc}"))
                return
            for i, item in enumerate(items if isinstance(items, list) else [items], 1):
                if not isinstance(item, dict):
                    yield Unit(i, None, orjson.dumps(item)[:200], error=CaptureError("not-object", f"array item {i} is a JSON {type(item).__name__}, not an object"))
                    continue
                yield from mapped_units(i, None, orjson.dumps(item)[:200], item, to_records)
            return
        try:
            obj = decode_line(data)
        except CaptureError as exc:
            yield Unit(1, 0, data[:200], error=exc)
            return
        yield from mapped_units(1, 0, data[:200], obj, to_records)
        return
    for line, offset, raw, obj in decoded_lines(open_lines(path, on_read=on_read)):
        if isinstance(obj, Unit):
            yield obj
        else:
            yield from mapped_units(line, offset, raw, obj, to_records)
