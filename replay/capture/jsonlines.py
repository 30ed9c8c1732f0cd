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
one record at line 1; JSON lines whose first line was truncated stay JSON lines
(:func:`document_mode`, :func:`document_or_lines`). With ``arrays``, a file that is a JSON array
(an export written as one ``[...]``, on one line or many) is read whole too, each item one record
numbered by its position from 1 (a truncated array is one ``bad-json`` error at line 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson

from replay import exactjson
from replay.capture.detect import open_binary
from replay.capture.files import LongLine, open_lines
from replay.capture.records import Skip, Unit, exchange, failed
from replay.capture.v1 import CaptureError, decode_line

__all__ = ["WHOLE_MAX_BYTES", "decoded_lines", "document_mode", "document_or_lines", "mapped_units", "read_json_lines", "read_whole"]

#: Largest pretty-printed JSON document read whole (bytes, decompressed).
WHOLE_MAX_BYTES = 256 << 20


def decoded_lines(
    lines: Iterable[tuple[int, int, bytes]], source: str | None = None, decode: Callable[[bytes], Any] = decode_line
) -> Iterator[tuple[int, int, bytes, Any]]:
    """The JSON-lines loop shared by every reader of one JSON value a line: takes ``(line, offset,
    raw)`` from :func:`open_lines` and yields ``(line, offset, raw, obj)``, ``obj`` being the
    decoded value, or a finished :class:`Unit` (``blank`` for a blank line, ``error`` for a line
    that ``decode`` rejects) tagged with ``source``. ``decode``: bytes -> value, raising
    :class:`CaptureError` (default :func:`decode_line`: JSON objects only)."""
    for line, offset, raw in lines:
        if not raw.strip():
            yield line, offset, raw, Unit(line, offset, raw, blank=True, source=source)
            continue
        try:
            yield line, offset, raw, decode(raw)
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


def document_mode(path: Path) -> str:
    """How to read the JSON file ``path``: ``"lines"`` (JSON lines: the first non-blank line is a
    JSON value by itself, or does not start with ``{`` / ``[``), ``"whole"`` (a pretty-printed
    document: its first line starts one and none of the next :data:`LOOKAHEAD_LINES` non-blank
    lines is a JSON object with keys by itself) or ``"either"`` (the first line starts a document
    but later lines are objects: a document whose elements sit one a line, or JSON lines whose
    first line was truncated; :func:`document_or_lines` tries the document, then the lines)."""
    first = True
    seen = 0
    for _line, _off, raw in open_lines(path):
        if isinstance(raw, LongLine):  # over --max-line-bytes: a line to skip, not a document to read whole
            return "lines"
        s = raw.strip()
        if not s:
            continue
        if first:
            if s[:1] not in (b"{", b"["):
                return "lines"
            try:
                exactjson.loads(s)
                return "lines"
            except orjson.JSONDecodeError:
                first = False
                continue
        try:
            obj = exactjson.loads(s)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and obj:
            return "either"
        seen += 1
        if seen >= LOOKAHEAD_LINES:
            break
    return "lines" if first else "whole"


#: Non-blank lines after a first line that is not JSON by itself looked at to tell a
#: pretty-printed document from JSON lines whose first line is broken.
LOOKAHEAD_LINES = 8


def document_or_lines(
    path: Path, decode: Callable[[bytes], Any] = decode_line, on_read: Callable[[int], None] | None = None
) -> Iterator[tuple[int, int, bytes, Any]]:
    """``(line, offset, raw, obj or finished Unit)`` of a JSON file, as :func:`decoded_lines`
    gives them; a pretty-printed document (:func:`document_mode`) is read whole (at most
    :data:`WHOLE_MAX_BYTES`) as one value at line 1 (``raw`` its first 200 bytes). In mode
    ``"either"`` a document that does not decode is read as lines instead (``on_read`` counts
    the bytes of the reading kept). Stream faults propagate as :func:`open_lines` raises them."""
    try:
        mode = document_mode(path)
    except Exception:  # noqa: BLE001 - the line reader below reports the fault
        mode = "lines"
    if mode != "lines":
        counted: list[int] = []
        data = read_whole(path, WHOLE_MAX_BYTES, f"a pretty-printed document is read whole: more than {WHOLE_MAX_BYTES} bytes; write it as JSON lines", counted.append)
        obj: Any = data
        if not isinstance(data, Unit):
            try:
                obj = decode(data)
            except CaptureError as exc:
                obj = Unit(1, 0, data[:200], error=exc)
        if mode == "whole" or not isinstance(obj, Unit):
            if on_read is not None and counted:
                on_read(sum(counted))
            yield 1, 0, (b"" if isinstance(data, Unit) else data[:200]), obj
            return
    yield from decoded_lines(open_lines(path, on_read=on_read), decode=decode)


def _starts_array(path: Path) -> bool:
    """True when the first non-blank line of ``path`` starts a JSON array (``[``)."""
    for _line, _off, raw in open_lines(path):
        if isinstance(raw, LongLine):
            return False
        s = raw.strip()
        if s:
            return s[:1] == b"["
    return False


def _array_items(path: Path, to_records: Callable[[Any], list[dict]], on_read: Callable[[int], None] | None) -> Iterator[Unit]:
    """The units of a JSON-array document ``path``, read whole (at most :data:`WHOLE_MAX_BYTES`):
    each item one record at its position from 1; an item that is not an object is a ``not-object``
    error there; a document that does not decode is one ``bad-json`` error at line 1."""
    data = read_whole(path, WHOLE_MAX_BYTES, f"a JSON array document is read whole: more than {WHOLE_MAX_BYTES} bytes; write it as JSON lines", on_read)
    if isinstance(data, Unit):
        yield data
        return
    try:
        items = exactjson.loads(data)
    except orjson.JSONDecodeError as exc:
        yield Unit(1, 0, data[:200], error=CaptureError("bad-json", f"a JSON array document: {exc}"))
        return
    for i, item in enumerate(items if isinstance(items, list) else [items], 1):
        raw = exactjson.dumps(item)[:200]
        if not isinstance(item, dict):
            yield Unit(i, None, raw, error=CaptureError("not-object", f"array item {i} is a JSON {type(item).__name__}, not an object"))
            continue
        yield from mapped_units(i, None, raw, item, to_records)


def read_json_lines(
    path: Path, to_records: Callable[[Any], list[dict]], on_read: Callable[[int], None] | None = None,
    decode: Callable[[bytes], Any] = decode_line, arrays: bool = False,
) -> Iterator[Unit]:
    """Units of a JSON-lines capture file mapped by ``to_records`` (rules: module docstring);
    ``decode``: as :func:`decoded_lines` (a reader that takes JSON arrays as values passes its
    own); ``arrays``: a file that is a JSON array is read item by item (:func:`_array_items`).
    Stream faults of a compressed file propagate as :class:`replay.capture.files.StreamFault`."""
    if arrays:
        try:
            is_array = _starts_array(path)
        except Exception:  # noqa: BLE001 - the line reader below reports the fault
            is_array = False
        if is_array:
            yield from _array_items(path, to_records, on_read)
            return
    for line, offset, raw, obj in document_or_lines(path, decode, on_read):
        if isinstance(obj, Unit):
            yield obj
        else:
            yield from mapped_units(line, offset, raw, obj, to_records)
