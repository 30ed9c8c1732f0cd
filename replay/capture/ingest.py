"""Ingest capture files into ``exchanges.parquet``, ``tools.parquet`` and ``ingest_errors.parquet``.

Every line of every file is accounted for: it becomes an ``exchanges`` row (with its ``tools``
rows), an ``ingest_errors`` row, or it is blank (whitespace only: not a record, not an error,
counted in :attr:`IngestStats.blank_lines`). A fault that stops reading a file (truncated or
corrupt compressed stream, unreadable file) gives one ``ingest_errors`` row standing for the line
at which reading stopped, and counts as one line. Hence always::

    stats.lines - stats.blank_lines - stats.skipped - stats.filtered == stats.exchanges + stats.errors

(``lines`` counts records; for JSON-lines formats a record is a line; see
:mod:`replay.capture.records` for the others.)

Every row passes through :mod:`replay.capture.redact` before it is written (secrets dropped, and
with ``redact=True`` message text hashed), whatever reader made it; a line longer than
``max_line_bytes`` is read past without being held and recorded as ``line-too-long``.

Rows go out in record batches of the :mod:`replay.tables` schemas as they fill (by row count and
by bytes), so memory does not grow with the size of the capture.
"""

from __future__ import annotations

import gc
import os
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from replay.capture import redact as _redact
from replay.capture.files import MAX_LINE_BYTES, LongLine, StreamFault, discover, line_limit
from replay.capture.filters import REASONS, Filters, FilterState
from replay.capture.readers import plan, read_units
from replay.capture.v1 import CaptureError, decode_line, parse_record
from replay.tables import EXCHANGES, INGEST_ERRORS, TOOLS

__all__ = ["IngestStats", "ingest", "EXCERPT_CHARS"]

#: Characters of a bad line kept in ``ingest_errors.excerpt``.
EXCERPT_CHARS = 120

#: Approximate bytes of buffered lines after which batches are flushed even if not full. A pending
#: row costs ~8x its line in memory (decoded strings, tool rows, the Arrow copy, Parquet's pages):
#: 16 MiB keeps ingest near 280 MiB peak RSS on 30 KB exchanges (64 MiB: 430 MiB), at the same CPU.
_FLUSH_BYTES = 16 << 20

#: Columns whose values are (nearly) all distinct texts: written without a dictionary, which
#: Parquet would build and then drop past its page limit (``tool_json`` repeats: it keeps one).
_UNIQUE_TEXT = frozenset({"request_json", "server_prompt", "server_output_text", "server_steps", "served_content", "excerpt", "detail"})


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Python's cyclic GC with a high first threshold within the block: ingest makes millions of
    short-lived containers (decoded lines) and few cycles, and every collection walks the rows
    pending in the writer (~10% of ingest CPU with the default threshold of 700)."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], 50_000), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


@dataclass
class IngestStats:
    """Counts of one :func:`ingest` run.

    ``files``: capture files read. ``lines``: lines seen (decompressed), including blank lines,
    plus one per stream/file fault. ``blank_lines``: whitespace-only lines (skipped, not errors).
    ``exchanges``: rows written to ``exchanges``. ``errors``: rows written to ``ingest_errors``.
    ``tools``: rows written to ``tools``. ``bytes_read``: bytes read from disk (compressed size).
    ``errors_by_reason``: ``errors`` split by ``reason``. ``duplicate_ids``: exchanges whose
    captured ``id`` was seen before in this run; their ``exchange_id`` became ``<id>@<file>:<line>``
    so that it stays a key.
    ``skipped``: records that are not LLM exchanges (a HAR entry to another URL, an OTel span
    without ``gen_ai.*`` attributes). ``formats``: files read per capture format.
    ``redactions``: what :mod:`replay.capture.redact` removed, by kind (``name``,
    ``value:<kind>``, ``hashed``, ``raw-dropped``); counts only, never the values.
    ``lines`` counts records: a line for the JSON-lines formats, else what each reader calls a
    record (:mod:`replay.capture.records`). ``filtered``: exchanges the run's filters dropped
    (:mod:`replay.capture.filters`; not errors), split in ``filtered_by`` by the first filter that
    dropped each (``model``, ``route``, ``no-ts``, ``since``, ``until``, ``sample``, ``limit``).
    Invariant: ``lines - blank_lines - skipped - filtered == exchanges + errors``.
    """

    files: int = 0
    lines: int = 0
    blank_lines: int = 0
    exchanges: int = 0
    errors: int = 0
    tools: int = 0
    bytes_read: int = 0
    duplicate_ids: int = 0
    skipped: int = 0
    filtered: int = 0
    filtered_by: dict[str, int] = field(default_factory=dict)
    errors_by_reason: dict[str, int] = field(default_factory=dict)
    formats: dict[str, int] = field(default_factory=dict)
    redactions: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        def n(count: int, noun: str) -> str:
            return f"{count:,} {noun}{'' if count == 1 else 's'}"

        skipped = f", {self.skipped:,} skipped" if self.skipped else ""
        filtered = f", {self.filtered:,} filtered out" if self.filtered else ""
        return f"{n(self.lines, 'line')}: {n(self.exchanges, 'exchange')}, {n(self.errors, 'error')}{skipped}{filtered}"


class _Writer:
    """The three Parquet writers and their pending rows."""

    def __init__(self, out_dir: Path, batch_rows: int, stats: IngestStats, hash_text: bool = False) -> None:
        self.batch_rows = batch_rows
        self.stats = stats
        self.hash_text = hash_text
        self.reasons: Counter[str] = Counter()
        self.redactions: Counter[str] = Counter()
        self.writers = {
            name: pq.ParquetWriter(out_dir / f"{name}.parquet", schema, compression="zstd",
                                   use_dictionary=[f.name for f in schema if f.name not in _UNIQUE_TEXT])
            for name, schema in (("exchanges", EXCHANGES), ("tools", TOOLS), ("ingest_errors", INGEST_ERRORS))
        }
        # pending exchanges: (exchange_row, tool_rows, raw line) kept together so a row the schema
        # rejects can still become an error row with its line
        self.units: list[tuple[dict, list[dict], bytes, int]] = []
        self.n_tools = 0
        self.errors: list[dict] = []
        self.pending_bytes = 0

    def add_exchange(self, row: dict, tools: list[dict], raw: bytes, offset: int, line_parsed: bool = False, request: Any = None) -> None:
        # the one gate every reader's rows pass: secrets out (and message text hashed with --redact);
        # ``line_parsed``: the row was parsed from ``raw`` itself (a v1 line), which the key gate may
        # scan; ``request``: the decoded request, whose names the scrub reads without decoding it again
        _redact.redact_exchange(row, tools, hash_text_too=self.hash_text, counts=self.redactions,
                                raw=raw if line_parsed else None, request=request)
        self.units.append((row, tools, raw, offset))
        self.n_tools += len(tools)
        self.pending_bytes += len(raw)
        if len(self.units) >= self.batch_rows or self.n_tools >= 8 * self.batch_rows or self.pending_bytes >= _FLUSH_BYTES:
            self.flush_exchanges()

    def add_error(self, source_file: str, line: int | None, offset: int | None, reason: str, detail: str, raw: bytes) -> None:
        self.errors.append(
            {
                "source_file": source_file,
                "source_line": line,
                "byte_offset": offset,
                "reason": reason,
                "detail": _redact.redact_error(detail, self.redactions, hash_text_too=self.hash_text),
                "excerpt": _redact.scrub_excerpt(raw, EXCERPT_CHARS, hash_text_too=self.hash_text, counts=self.redactions),
            }
        )
        self.reasons[reason] += 1
        self.stats.errors += 1
        if len(self.errors) >= self.batch_rows:
            self.flush_errors()

    def flush_exchanges(self) -> None:
        if not self.units:
            return
        units, self.units, self.n_tools, self.pending_bytes = self.units, [], 0, 0
        try:
            ex = pa.RecordBatch.from_pylist([u[0] for u in units], schema=EXCHANGES)
            tl = pa.RecordBatch.from_pylist([t for u in units for t in u[1]], schema=TOOLS)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            # a value the schema rejects: find the unit(s) and turn them into error rows
            ok: list[tuple[dict, list[dict], bytes, int]] = []
            for row, tools, raw, offset in units:
                try:
                    pa.RecordBatch.from_pylist([row], schema=EXCHANGES)
                    pa.RecordBatch.from_pylist(tools, schema=TOOLS)
                    ok.append((row, tools, raw, offset))
                except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                    self.add_error(row["source_file"], row["source_line"], offset, "bad-field",
                                   f"value does not fit the table schema: {exc}", raw)
            ex = pa.RecordBatch.from_pylist([u[0] for u in ok], schema=EXCHANGES)
            tl = pa.RecordBatch.from_pylist([t for u in ok for t in u[1]], schema=TOOLS)
        if ex.num_rows:
            self.writers["exchanges"].write_batch(ex)
        if tl.num_rows:
            self.writers["tools"].write_batch(tl)
        self.stats.exchanges += ex.num_rows
        self.stats.tools += tl.num_rows

    def flush_errors(self) -> None:
        if self.errors:
            self.writers["ingest_errors"].write_batch(pa.RecordBatch.from_pylist(self.errors, schema=INGEST_ERRORS))
            self.errors = []

    def close(self) -> None:
        try:
            self.flush_exchanges()
            self.flush_errors()
        finally:
            for w in self.writers.values():
                w.close()
        self.stats.errors_by_reason = dict(sorted(self.reasons.items()))
        self.stats.redactions = dict(sorted(self.redactions.items()))


def ingest(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    batch_rows: int = 2048,
    progress: Callable[[int], None] | None = None,
    capture_format: str | None = None,
    tokenizer: Any = None,
    redact: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    filters: Filters | None = None,
) -> IngestStats:
    """Read capture files (format v1) and write the ingest tables to ``out_dir``.

    ``paths``: files and folders, as for :func:`replay.capture.files.discover`. ``out_dir``:
    created if missing; ``exchanges.parquet``, ``tools.parquet`` and ``ingest_errors.parquet``
    are (over)written there, all three always, with the schemas of :mod:`replay.tables` (an empty
    table when nothing went to it). ``batch_rows``: exchanges (and error rows) per record batch.
    ``progress``: called with the number of bytes just read from disk (compressed), for a
    progress bar. ``redact``: hash message text (``--redact``, see :mod:`replay.capture.redact`);
    secrets are dropped whatever its value. ``max_line_bytes``: a longer line (decompressed bytes)
    is read past without being held and becomes an ``ingest_errors`` row ``line-too-long``.

    Each line is parsed by :func:`replay.capture.v1.parse_line`; a line that fails becomes an
    ``ingest_errors`` row (file, 1-based line, byte offset in the decompressed stream, reason,
    detail, excerpt of at most :data:`EXCERPT_CHARS` characters) and the run goes on. A truncated
    or corrupt compressed stream keeps the lines decoded before the fault and adds one row with
    reason ``truncated-stream`` / ``corrupt-stream``; a file that cannot be opened or read adds
    one row with reason ``unreadable-file`` (line: where reading stopped). ``source_file`` is the
    path as discovered (``str(path)``).

    A captured ``id`` seen before in the run is kept distinct as ``<id>@<file>:<line>``
    (counted in :attr:`IngestStats.duplicate_ids`).

    ``capture_format``: read every file as this format (one of
    :data:`replay.capture.detect.FORMATS`); None detects each file's format
    (:mod:`replay.capture.detect`). ``tokenizer``: a ``tokenizers.Tokenizer`` that decodes token
    ids of server logs logged without text (:mod:`replay.capture.serverlog`). ``filters``: which
    exchanges to keep (:class:`replay.capture.filters.Filters`); the others are counted in
    :attr:`IngestStats.filtered`.

    Returns :class:`IngestStats`. Raises :class:`FileNotFoundError` when a path does not exist
    (before anything is written), :class:`ValueError` when ``batch_rows < 1`` or
    ``capture_format`` is unknown, and
    :class:`OSError` when ``out_dir`` cannot be written.
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be >= 1, got {batch_rows}")
    if max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be >= 1, got {max_line_bytes}")
    files = discover(paths)
    with line_limit(max_line_bytes), _fewer_collections():  # every reader's open_lines reads with this limit
        return _ingest_planned(plan(files, capture_format), files, out_dir, batch_rows, progress, redact, max_line_bytes, tokenizer, filters)


def _ingest_planned(
    planned: list, files: list[Path], out_dir: str | os.PathLike, batch_rows: int,
    progress: Callable[[int], None] | None, redact: bool, max_line_bytes: int, tokenizer: Any,
    filters: Filters | None = None,
) -> IngestStats:
    """The body of :func:`ingest` once the files are planned."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stats = IngestStats(files=len(files))

    def on_read(n: int) -> None:
        stats.bytes_read += n
        if progress is not None:
            progress(n)

    writer = _Writer(out, batch_rows, stats, hash_text=redact)
    # The one structure that grows with the capture: the exchange ids seen (tens of bytes each).
    seen_ids: set[str] = set()
    keep = FilterState(filters) if filters is not None and filters.active else None
    formats: dict[str, int] = {}
    try:
        for pf in planned:
            source = str(pf.path)
            formats[pf.fmt] = formats.get(pf.fmt, 0) + 1
            last_line = 0
            last_end = 0
            try:
                for unit in read_units(pf, on_read=on_read, tokenizer=tokenizer):
                    src = unit.source or source
                    line_no, offset, raw = unit.line, unit.offset, unit.raw
                    size = raw.length if isinstance(raw, LongLine) else len(raw)
                    if line_no is not None and src == source:
                        last_line, last_end = line_no, (offset or 0) + size + 1
                    stats.lines += 1
                    if isinstance(raw, LongLine) and not (unit.blank or unit.skipped):
                        writer.add_error(src, line_no, offset, "line-too-long",
                                         f"line of {raw.length} bytes is longer than the limit of {max_line_bytes} bytes "
                                         f"(--max-line-bytes); read past, not parsed", raw)
                        continue
                    if unit.blank:
                        stats.blank_lines += 1
                        continue
                    if unit.skipped:
                        stats.skipped += 1
                        continue
                    if unit.error is not None:
                        writer.add_error(src, line_no, offset, unit.error.reason, unit.error.detail, raw)
                        continue
                    try:
                        # the one place every format's record becomes rows
                        rec = decode_line(raw) if unit.v1_raw else unit.record  # parse_line, keeping the record
                        row, tools = parse_record(rec, src, line_no if line_no is not None else 0, "v1" if unit.v1_raw else pf.fmt)
                    except CaptureError as exc:
                        writer.add_error(src, line_no, offset, exc.reason, exc.detail, raw)
                        continue
                    except Exception as exc:  # a bug in the parser must not stop the run
                        writer.add_error(src, line_no, offset, "internal-error", repr(exc), raw)
                        continue
                    if keep is not None and not keep.keep(row):
                        stats.filtered += 1
                        continue
                    xid = row["exchange_id"]
                    if xid in seen_ids:  # keep exchange_id a key: every join of the SQL relies on it
                        row["exchange_id"] = xid = f"{xid}@{src}:{line_no}"
                        for t in tools:
                            t["exchange_id"] = xid
                        stats.duplicate_ids += 1
                    seen_ids.add(xid)
                    writer.add_exchange(row, tools, raw, offset or 0, line_parsed=unit.v1_raw, request=rec.get("request"))
            except StreamFault as fault:
                stats.lines += 1
                writer.add_error(source, fault.line_no, fault.byte_offset, fault.reason, fault.detail, fault.partial)
            except OSError as exc:
                stats.lines += 1
                writer.add_error(source, last_line + 1, last_end, "unreadable-file", f"{type(exc).__name__}: {exc}", b"")
    finally:
        writer.close()
        stats.formats = dict(sorted(formats.items()))
        if keep is not None:
            stats.filtered_by = {r: keep.dropped[r] for r in REASONS if r in keep.dropped}
    return stats
