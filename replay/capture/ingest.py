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

One concern at over 600 lines: the ingest stage of one process, from planned files to the three
tables (batches read, ``ingest_batch`` on each, ids made unique, ``limit`` applied, the tables
written atomically, every line accounted for); its parallel engine is the runner's
(:mod:`replay.runner.ingest`), and the readers are their own modules.
"""

from __future__ import annotations

import gc
import os
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from replay import exactjson
from replay.capture import redact as _redact
from replay.capture.columns import batch_from_rows, numpy_column, take as _take, text_column, text_view_column
from replay.capture.files import MAX_LINE_BYTES, LongLine, StreamFault, discover, line_limit, source_name
from replay.capture.filters import REASONS, Filters
from replay.capture.readers import plan, read_units
from replay.capture.records import lines_and_records
from replay.capture.v1 import CaptureError, decode_line, record_row
from replay.tables import EXCHANGES, INGEST_ERRORS, TOOLS

__all__ = ["EXCERPT_CHARS", "IngestSpec", "IngestStats", "LineBatch", "ingest", "ingest_batch"]

#: Characters of a bad line kept in ``ingest_errors.excerpt``.
EXCERPT_CHARS = 120

#: Approximate bytes of buffered lines after which batches are flushed even if not full. A pending
#: row costs ~8x its line in memory (decoded strings, tool rows, the Arrow copy, Parquet's pages):
#: a larger threshold raises ingest's peak RSS at the same CPU (figures: ``benchmarks/RESULTS.md``).
_FLUSH_BYTES = 16 << 20
#: Columns whose values are (nearly) all distinct texts: written without a dictionary, which
#: Parquet would build and then drop past its page limit (``tool_json`` repeats: it keeps one).
_UNIQUE_TEXT = frozenset({"request_json", "server_prompt", "server_output_text", "server_steps", "served_content", "excerpt", "detail"})


@contextmanager
def _system_allocator() -> Iterator[None]:
    """Arrow's allocations in the system allocator within the block: ingest builds and frees a
    batch of large buffers per flush, which mimalloc (pyarrow's default pool) returns to the OS
    and faults in again each time (system CPU; the same user time)."""
    old = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(old)


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Python's cyclic GC with a high first threshold within the block: ingest makes millions of
    short-lived containers (decoded lines) and few cycles, and every collection walks the rows
    pending in the writer (a noticeable share of ingest CPU with the default threshold of 700)."""
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
    ``skipped``: records that are not LLM exchanges (a HAR entry to another URL, an OTel span that
    is not a model call or holds no content). ``formats``: files read per capture format.
    ``redactions``: what :mod:`replay.capture.redact` removed, by kind (``name``,
    ``value:<kind>``, ``hashed``, ``raw-dropped``); counts only, never the values.
    ``lines`` counts records: a line for the JSON-lines formats, else what each reader calls a
    record (:mod:`replay.capture.records`). ``filtered``: exchanges the run's filters dropped
    (:mod:`replay.capture.filters`; not errors), split in ``filtered_by`` by the first filter that
    dropped each (``model``, ``route``, ``no-ts``, ``since``, ``until``, ``sample``, ``limit``).
    Invariant: ``lines - blank_lines - skipped - filtered == exchanges + errors``.
    ``shared_line_records``: records read from a line that held an earlier record of the same file
    too (an OTLP export line holding several spans): the files had ``lines - shared_line_records``
    lines. ``skipped_by``: ``skipped`` split by the reason the reader gave (records skipped without
    one are not in it).
    ``files_without_exchanges``: one dict per capture file (as planned: a Batch input with its
    output is one file) that gave no exchange, in reading order, from the per-file counts ingest
    keeps: ``file``, ``lines``, ``blank_lines``, ``skipped``, ``errors``, ``filtered`` (the
    file's share of the counts above) and ``why``, a sentence (:func:`no_exchange_why`).
    ``skipped_files``: the paths discovery left out, one dict each (``path``, ``reason``:
    ``duplicate``, ``not-a-regular-file`` or ``folder-walked``, ``detail``; see
    :func:`replay.capture.files.discover`): a symlink beside its target is read once, a FIFO found
    in a folder is not read.
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
    files_without_exchanges: list[dict[str, Any]] = field(default_factory=list)
    shared_line_records: int = 0
    skipped_by: dict[str, int] = field(default_factory=dict)
    skipped_files: list[dict[str, Any]] = field(default_factory=list)

    def __str__(self) -> str:
        def n(count: int, noun: str) -> str:
            return f"{count:,} {noun}{'' if count == 1 else 's'}"

        skipped = f", {self.skipped:,} skipped" if self.skipped else ""
        no_ts = self.filtered_by.get("no-ts", 0)
        filtered = (f", {self.filtered:,} filtered out" + (f" ({no_ts:,} for having no timestamp)" if no_ts else "")
                    if self.filtered else "")
        return f"{lines_and_records(self.lines, self.shared_line_records)}: {n(self.exchanges, 'exchange')}, {n(self.errors, 'error')}{skipped}{filtered}"


def no_exchange_why(lines: int, blank_lines: int, skipped: int, errors: int, filtered: int) -> str:
    """Why a capture file gave no exchange, from its counts (records as :class:`IngestStats`
    counts them): ``"empty (no lines)"``, ``"only blank lines (N)"``, ``"only ingest errors (N)"``,
    else the non-zero parts joined (``"2 ingest errors, 3 skipped (not an LLM exchange), 1 dropped
    by the filters, 4 blank lines"``). Returns the sentence (no trailing period)."""
    if not lines:
        return "empty (no lines)"
    if blank_lines == lines:
        return f"only blank lines ({blank_lines:,})"
    if errors and errors + blank_lines == lines:
        return f"only ingest errors ({errors:,}{f', and {blank_lines:,} blank lines' if blank_lines else ''})"
    parts = []
    if errors:
        parts.append(f"{errors:,} ingest error{'' if errors == 1 else 's'}")
    if skipped:
        parts.append(f"{skipped:,} skipped (not an LLM exchange)")
    if filtered:
        parts.append(f"{filtered:,} dropped by the filters")
    if blank_lines:
        parts.append(f"{blank_lines:,} blank line{'' if blank_lines == 1 else 's'}")
    return ", ".join(parts)


def parse_record(rec: dict, source_file: str, line_no: int, capture_format: str = "v1") -> tuple[dict, Any]:
    """One record's ``exchanges`` row and tools, as ingest keeps them until its batch is written:
    :func:`replay.capture.v1.record_row` (``request_json`` as UTF-8 bytes, the tools a shared
    :class:`replay.capture.v1.ToolList`). Raises as :func:`replay.capture.v1.parse_record`."""
    return record_row(rec, source_file, line_no, capture_format)


#: ``tools`` columns a declaration carries (all but ``exchange_id`` and ``tool_index``).
_DECL = pa.schema([f for f in TOOLS if f.name not in ("exchange_id", "tool_index")])
#: zstd level of the ingest tables: level 3 is both smaller and faster than Arrow's default (1) on
#: request text (figures: ``benchmarks/RESULTS.md``).
ZSTD_LEVEL = 3
#: Parquet data pages of the ingest tables: at most about PAGE_BYTES, a page being closed once it
#: holds that much, checked every PAGE_CHECK_ROWS rows. A reader decodes a column a page at a time,
#: so this is what a stage's slice of a row group costs to read: with Arrow's defaults (checked
#: every 1,024 rows) a 512-exchange row group was one page of ``request_json``, decoded whole for
#: each 64-row slice; with these a slice decodes a small page. The file grows a little (zstd sees
#: less of the repeated tool lists at a time); writing costs the same CPU (figures:
#: ``benchmarks/RESULTS.md``).
PAGE_BYTES = 4 << 20
PAGE_CHECK_ROWS = 16

#: Columns whose Parquet statistics are kept (min/max of short values a reader may filter on);
#: the long texts get none (computing min/max of 30 KB strings costs CPU and no query uses them).
_STATS = ("exchange_id", "source_file", "source_line", "ts", "route", "model", "stream", "n_messages", "n_tools",
          "served_finish_reason", "served_chunks", "capture_format", "tool_index", "type", "name", "has_description",
          "has_parameters", "has_strict", "strict", "reason", "byte_offset")


#: The ``exchanges`` batches as :func:`exchanges_batch` makes them: :data:`replay.tables.EXCHANGES`
#: with ``request_json`` a ``string_view`` pointing into each row's own JSON bytes (no copy of a
#: batch's request text into one buffer). Parquet stores it as a string column; the file's Arrow
#: schema is written as EXCHANGES (:func:`_parquet_writer`).
EXCHANGES_BATCH = pa.schema([pa.field(f.name, pa.string_view(), nullable=f.nullable) if f.name == "request_json"
                             else pa.field(f.name, pa.dictionary(pa.int32(), pa.string()), nullable=f.nullable) if f.name == "tools_json"
                             else f for f in EXCHANGES])


#: The ``exchanges`` columns :func:`exchanges_batch` converts from the rows' values in one pass
#: (all but the two it builds itself), as the fields of one struct type.
_PLAIN_FIELDS = [f for f in EXCHANGES_BATCH if f.name not in ("request_json", "tools_json")]
_PLAIN_STRUCT = pa.struct(_PLAIN_FIELDS)


def exchanges_batch(rows: list[dict]) -> pa.RecordBatch:
    """Rows (dicts keyed by :data:`replay.tables.EXCHANGES` column names; ``request_json`` str or
    UTF-8 ``bytes``) as one record batch of :data:`EXCHANGES_BATCH` (``request_json`` a view of
    each row's text, :func:`replay.capture.columns.text_view_column`; ``tools_json`` a dictionary
    array of each distinct tool list text once, :func:`_tools_json_column`; the other columns
    converted by ``pa.array`` of the rows as one struct array, whose children are the columns:
    one pass over the dicts in C, half the time of a list and a ``pa.array`` per column, with the
    same converters). Raises ``TypeError`` / ``ValueError`` / ``OverflowError`` for a value the
    schema rejects (including a null in a column that may not hold one), as
    :func:`replay.capture.columns.batch_from_rows` of the columns one by one does: a batch the
    one-pass conversion rejects is converted again that way, for its error."""
    built = {"request_json": text_view_column([r["request_json"] for r in rows]),
             "tools_json": _tools_json_column([r.get("tools_json") for r in rows])}
    try:
        children = pa.array(rows, _PLAIN_STRUCT).flatten()
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        children = None
    if children is None or any(a.null_count and not f.nullable for f, a in zip(_PLAIN_FIELDS, children)):
        return batch_from_rows(rows, EXCHANGES_BATCH, built)  # raises the column's own error
    built.update(zip((f.name for f in _PLAIN_FIELDS), children))
    return pa.RecordBatch.from_arrays([built[f.name] for f in EXCHANGES_BATCH], schema=EXCHANGES_BATCH)


def _tools_json_column(values: list) -> pa.DictionaryArray:
    """``values`` (``tools_json`` of each row: UTF-8 ``bytes`` or ``str``, mostly the same shared
    object per distinct tool list, or None) as a dictionary array whose dictionary holds each
    distinct text once: objects are told apart by identity first, so a list's ~14 KB text is hashed
    once per batch, not once per row (then Parquet writes one dictionary page per row group)."""
    by_id: dict[int, int] = {}
    by_text: dict[Any, int] = {}
    texts: list[Any] = []
    idx: list[int | None] = []
    for v in values:
        if v is None:
            idx.append(None)
            continue
        i = by_id.get(id(v))
        if i is None:
            t = v.decode("utf-8") if isinstance(v, bytes) else v
            i = by_text.get(t)
            if i is None:
                i = by_text[t] = len(texts)
                texts.append(t)
            by_id[id(v)] = i
        idx.append(i)
    return pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32()), pa.array(texts, pa.string()))


#: The ``tools`` batches as :func:`tools_batch` makes them: :data:`replay.tables.TOOLS` with
#: ``tool_json`` dictionary-encoded (each distinct declaration once per batch). Parquet stores
#: such a column as it stores a dictionary-encoded string column, and the file's Arrow schema is
#: written as TOOLS (:func:`_parquet_writer`), so readers see plain strings.
TOOLS_BATCH = pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), pa.string()), nullable=f.nullable) if f.name == "tool_json" else f
                         for f in TOOLS])


def tools_batch(units: list[tuple[str, Any]]) -> pa.RecordBatch:
    """The ``tools`` rows of ``units`` (``(exchange_id, tools)``: tools a shared
    :class:`replay.capture.v1.ToolList` or a list of column dicts) as one record batch of
    :data:`TOOLS_BATCH` (the columns of :data:`replay.tables.TOOLS`, ``tool_json`` a dictionary
    array): each distinct declaration of the batch converted to Arrow once, the rows taken from
    them by index, ``tool_json`` never copied per row (Parquet's dictionary page then stores each
    declaration once per row group, without hashing every row's text). Raises as
    :func:`exchanges_batch`."""
    import numpy as np

    pos: dict[int, int] = {}  # id(declaration dict) -> its row in `decls`
    decls: list[dict] = []
    of_list: dict[int, Any] = {}  # id(tool list) -> the indices of its declarations
    parts: list[Any] = []
    counts: list[int] = []
    for _xid, tools in units:
        idx = of_list.get(id(tools))
        if idx is None:
            cols = getattr(tools, "cols", tools)
            got = []
            for c in cols:
                i = pos.get(id(c))
                if i is None:
                    i = pos[id(c)] = len(decls)
                    decls.append(c)
                got.append(i)
            idx = of_list[id(tools)] = np.asarray(got, dtype=np.int32)
        parts.append(idx)
        counts.append(len(idx))
    n = sum(counts)
    if not n:
        return batch_from_rows([], TOOLS_BATCH, {"tool_json": pa.DictionaryArray.from_arrays(numpy_column(np.zeros(0, np.int32)), text_column([]))})
    take = numpy_column(np.concatenate(parts))
    table = batch_from_rows(decls, _DECL)
    counts_np = np.asarray(counts, dtype=np.int64)
    xids = _take(text_column([u[0] for u in units]), numpy_column(np.repeat(np.arange(len(units)), counts_np)))
    starts = np.repeat(np.cumsum(counts_np) - counts_np, counts_np)
    arrays = {"exchange_id": xids, "tool_index": numpy_column((np.arange(n) - starts).astype(np.int32))}
    for f in _DECL:
        col = table.column(f.name)
        if f.name == "tool_json":  # the dictionary's values unique (else Parquet falls back to plain pages)
            codes: dict[Any, int] = {}  # each distinct text, in order of first occurrence (as dictionary_encode)
            idx = [None if t is None else codes.setdefault(t, len(codes)) for t in col.to_pylist()]
            arrays[f.name] = pa.DictionaryArray.from_arrays(_take(pa.array(idx, pa.int32()), take), text_column(list(codes)))
        else:
            arrays[f.name] = _take(col, take)
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in TOOLS_BATCH], schema=TOOLS_BATCH)


def _tools_json_of(request_json: Any) -> Any:
    """The ``tools_json`` of a scrubbed ``request_json`` (str or bytes):
    ``orjson.dumps`` of its decoded ``tools`` when a list, else ``b"null"``; None (the stream stage
    then decodes the request itself) when it does not decode."""
    text = request_json.encode("utf-8") if isinstance(request_json, str) else request_json
    try:
        request = exactjson.loads(text)
        tools = request.get("tools") if isinstance(request, dict) else None
        return exactjson.dumps(tools) if isinstance(tools, list) else b"null"
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return None


def _parquet_writer(path: Path, schema: pa.Schema, batches: pa.Schema | None = None) -> pq.ParquetWriter:
    """A writer of table ``schema`` fed batches of schema ``batches`` (default: ``schema``; else the
    same columns with some dictionary-encoded, as :data:`TOOLS_BATCH`): the Arrow schema the file
    records is ``schema`` either way, so every reader gets the table's own types."""
    batches = batches or schema
    w = pq.ParquetWriter(path, batches, compression="zstd", compression_level=ZSTD_LEVEL,
                         data_page_size=PAGE_BYTES, write_batch_size=PAGE_CHECK_ROWS,
                         use_dictionary=[f.name for f in schema if f.name not in _UNIQUE_TEXT],
                         write_statistics=[f.name for f in schema if f.name in _STATS],
                         store_schema=batches.equals(schema))
    if not batches.equals(schema):
        import base64

        w.add_key_value_metadata({b"ARROW:schema": base64.b64encode(schema.serialize().to_pybytes())})
    return w


@dataclass(frozen=True)
class IngestSpec:
    """What :func:`ingest_batch` needs besides its batch: plain values, picklable, so that a pool
    process (``--jobs``, :mod:`replay.runner.pool`) gets it once. ``redact``: hash message text
    (``--redact``); ``filters``: the stateless filters (model, route, since/until, sample) applied
    per record; ``limit`` is applied where the batches are joined, in reading order."""

    redact: bool = False
    filters: Filters | None = None


@dataclass
class LineBatch:
    """A batch of records of one capture file, in reading order: ``source`` (``source_file`` of
    its rows) and ``entries``, each one of

    - ``("line", line_no, offset, raw)``: a capture-v1 line (bytes) to parse;
    - ``("record", line_no, offset, raw, record, fmt, source)``: a reader's v1-form record
      (:mod:`replay.capture.records`), ``raw`` its excerpt bytes, ``fmt`` its capture format,
      ``source`` None or the file it came from when not ``source`` (a Batch output line);
    - ``("error", line_no, offset, raw, reason, detail, source)``: a record that failed before
      parsing (a reader's error, a line over the limit, a stream fault).

    ``nbytes``: the raw bytes it holds (for batch sizing). ``last``: False for a part of a batch
    read in parts (``--jobs``) but its last one, True for a whole batch."""

    source: str
    entries: list[tuple] = field(default_factory=list)
    nbytes: int = 0
    last: bool = True


def ingest_batch(batch: LineBatch, spec: IngestSpec) -> dict[str, Any]:
    """The ingest stage on one batch: every entry of ``batch`` (a :class:`LineBatch`) parsed
    (:func:`replay.capture.v1.record_row`), filtered (``spec.filters`` but ``limit``), scrubbed
    (:mod:`replay.capture.redact`) and converted to Arrow. Returns ``{"exchanges": table,
    "tools": table, "ingest_errors": table}`` (schemas of :mod:`replay.tables`; rows in the
    batch's order, errors in the order met, a value the schema rejects last) plus ``"tool_counts"``
    (tool rows per exchange row), ``"reasons"``, ``"redactions"``, ``"filtered_by"`` (counts) and
    ``"late_errors"`` (how many of the last ``ingest_errors`` rows are values the schema rejected).
    Duplicate ids are not renamed here: that needs the whole run (see :func:`ingest`).
    Never raises for the data: a record that fails is an ``ingest_errors`` row (``internal-error``
    for an unexpected exception), naming its file and line."""
    with _fewer_collections(), _system_allocator():  # in a pool process too
        rows = _Rows(spec)
        for e in batch.entries:
            kind = e[0]
            if kind == "error":
                rows.add_error(e[6] or batch.source, e[1], e[2], e[4], e[5], e[3])
            elif kind == "line":
                rows.add(batch.source, e[1], e[2], e[3], None, "v1")
            else:
                rows.add(e[6] or batch.source, e[1], e[2], e[3], e[4], e[5])
        met = len(rows.errors)
        res = rows.tables()
        # errors for values the schema rejects come after those met while parsing: a batch cut in
        # parts (--jobs) puts them back there (replay.runner.ingest._combine)
        res["late_errors"] = len(rows.errors) - met
        return res


def failed_batch(batch: LineBatch, message: str) -> dict[str, Any]:
    """The result of a batch whose pool process died twice (:func:`replay.runner.pool.map_batches`):
    every record of it an ``ingest_errors`` row ``internal-error`` carrying ``message``."""
    rows = _Rows(IngestSpec())
    for e in batch.entries:
        src = (e[6] if e[0] != "line" else None) or batch.source
        rows.add_error(src, e[1], e[2], "internal-error", message, e[3])
    return rows.tables()


class _Rows:
    """The rows of one batch as they are parsed (:func:`ingest_batch`)."""

    def __init__(self, spec: IngestSpec) -> None:
        self.hash_text = spec.redact
        f = spec.filters
        self.filters = f if f is not None and f.active else None
        self.units: list[tuple[dict, Any, bytes, int | None]] = []
        self.errors: list[dict] = []
        self.reasons: Counter[str] = Counter()
        self.redactions: Counter[str] = Counter()
        self.filtered: Counter[str] = Counter()

    def add(self, src: str, line_no: int | None, offset: int | None, raw: bytes, rec: Any, fmt: str) -> None:
        line = rec is None  # a v1 line, parsed here from raw
        try:
            # the one place every format's record becomes rows
            if line:
                rec = decode_line(raw)  # parse_line, keeping the record
            row, tools = parse_record(rec, src, line_no if line_no is not None else 0, fmt)
        except CaptureError as exc:
            detail = exc.detail
            if line and isinstance(rec, dict):  # a v1 line that fails: say when its keys are another format's
                from replay.capture.detect import classify_record

                other = classify_record(rec)
                if other not in (None, "v1"):
                    detail += f"; its keys are those of a {other} record (read as v1: --capture-format {other}, or let the format be detected)"
            self.add_error(src, line_no, offset, exc.reason, detail, raw)
            return
        except Exception as exc:  # a bug in the parser must not stop the run
            self.add_error(src, line_no, offset, "internal-error", repr(exc), raw)
            return
        if self.filters is not None:
            reason = self.filters.drop_reason(row)
            if reason is not None:
                self.filtered[reason] += 1
                return
        # the one gate every reader's rows pass: secrets out (and message text hashed with
        # --redact); a v1 line's own bytes are what the key gate scans; the decoded request is
        # where the names are dropped, without decoding request_json again
        before = row["request_json"]
        scrubbed = _redact.redact_exchange(row, tools, hash_text_too=self.hash_text, counts=self.redactions,
                                           raw=raw if line else None, request=rec.get("request"))
        if scrubbed is not None:
            tools = scrubbed
        after = row["request_json"]
        if after is not before and not (isinstance(after, str) and isinstance(before, bytes) and after.encode("utf-8") == before):
            row["tools_json"] = _tools_json_of(after)  # the scrub rewrote the request: its tools text is the new one's
        self.units.append((row, tools, raw, offset))

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

    def tables(self) -> dict[str, Any]:
        units = self.units
        bad = (pa.ArrowException, TypeError, ValueError, OverflowError)  # UnicodeEncodeError is a ValueError
        try:
            ex = exchanges_batch([u[0] for u in units])
            tl = tools_batch([(u[0]["exchange_id"], u[1]) for u in units])
        except bad:
            # a value the schema rejects: find the unit(s) and turn them into error rows
            ok = []
            for unit in units:
                row, tools, raw, offset = unit
                try:
                    exchanges_batch([row])
                    tools_batch([(row["exchange_id"], tools)])
                    ok.append(unit)
                except bad as exc:
                    self.add_error(row["source_file"], row["source_line"], offset, "bad-field",
                                   f"value does not fit the table schema: {exc}", raw)
            units = ok
            ex = exchanges_batch([u[0] for u in units])
            tl = tools_batch([(u[0]["exchange_id"], u[1]) for u in units])
        return {
            "exchanges": ex,
            "tools": tl,
            "ingest_errors": batch_from_rows(self.errors, INGEST_ERRORS),
            "tool_counts": [len(u[1]) for u in units],
            "reasons": dict(self.reasons),
            "redactions": dict(self.redactions),
            "filtered_by": dict(self.filtered),
        }


class _Sink:
    """The three tables of a run, written from batch results in batch order (temporary names,
    renamed into place when every batch is in: an interrupted ingest leaves no table that reads as
    complete), with what needs the whole run: duplicate ids renamed, ``limit``, the counts."""

    def __init__(self, out_dir: Path, stats: IngestStats, limit: int | None,
                 on_exchanges: Callable[[int, pa.RecordBatch], None] | None = None) -> None:
        self.stats = stats
        self.on_exchanges = on_exchanges
        self.row_groups = 0  # of exchanges.parquet written so far: the key of the next one
        self.limit = limit
        self.kept = 0
        self.seen_ids: set[str] = set()  # the one structure that grows with the capture (tens of bytes an exchange)
        self.reasons: Counter[str] = Counter()
        self.redactions: Counter[str] = Counter()
        self.filtered: Counter[str] = Counter()
        self.per_file: dict[str, list[int]] = {}  # source -> [exchanges, errors] written from its batches
        self.paths = {name: out_dir / f"{name}.parquet" for name in ("exchanges", "tools", "ingest_errors")}
        self.tmp = {name: p.with_name(f".tmp-{os.getpid()}-{p.name}") for name, p in self.paths.items()}
        self.writers = {
            "exchanges": _parquet_writer(self.tmp["exchanges"], EXCHANGES, EXCHANGES_BATCH),
            "tools": _parquet_writer(self.tmp["tools"], TOOLS, TOOLS_BATCH),
            "ingest_errors": _parquet_writer(self.tmp["ingest_errors"], INGEST_ERRORS),
        }

    def write(self, res: dict[str, Any], source: str) -> None:
        """Write one batch's result; ``source``: the planned file the batch was read from."""
        ex, tl, err, counts = res["exchanges"], res["tools"], res["ingest_errors"], res["tool_counts"]
        if self.limit is not None and self.kept + ex.num_rows > self.limit:
            k = max(self.limit - self.kept, 0)
            self.filtered["limit"] += ex.num_rows - k
            tl = tl.slice(0, sum(counts[:k]))
            ex, counts = ex.slice(0, k), counts[:k]
        self.kept += ex.num_rows
        ex, tl = self._unique_ids(ex, tl, counts)
        if ex.num_rows:
            self.writers["exchanges"].write_batch(ex)  # one row group
            if self.on_exchanges is not None:
                self.on_exchanges(self.row_groups, ex)
            self.row_groups += 1
        if tl.num_rows:
            self.writers["tools"].write_batch(tl)
        if err.num_rows:
            self.writers["ingest_errors"].write_batch(err)
        self.stats.exchanges += ex.num_rows
        self.stats.tools += tl.num_rows
        self.stats.errors += err.num_rows
        mine = self.per_file.setdefault(source, [0, 0])
        mine[0] += ex.num_rows
        mine[1] += err.num_rows
        self.reasons.update(res["reasons"])
        self.redactions.update(res["redactions"])
        self.filtered.update(res["filtered_by"])

    def _unique_ids(self, ex: pa.RecordBatch, tl: pa.RecordBatch, counts: list[int]) -> tuple[pa.RecordBatch, pa.RecordBatch]:
        """A captured ``id`` seen before in the run becomes ``<id>@<file>:<line>`` (keep
        ``exchange_id`` a key: every join of the SQL relies on it), in its tool rows too."""
        ids = ex.column(0).to_pylist()
        seen = self.seen_ids
        renamed = None
        for i, xid in enumerate(ids):
            if xid in seen:
                if renamed is None:
                    renamed = list(ids)
                    files, lines = ex.column(1).to_pylist(), ex.column(2).to_pylist()
                renamed[i] = xid = f"{xid}@{files[i]}:{lines[i]}"
                self.stats.duplicate_ids += 1
            seen.add(xid)
        if renamed is None:
            return ex, tl
        import numpy as np

        new_ids = text_column(renamed)
        ex = pa.RecordBatch.from_arrays([new_ids, *ex.columns[1:]], schema=ex.schema)
        tool_ids = _take(new_ids, numpy_column(np.repeat(np.arange(len(renamed)), counts).astype(np.int64)))
        return ex, pa.RecordBatch.from_arrays([tool_ids, *tl.columns[1:]], schema=tl.schema)

    def close(self, ok: bool) -> None:
        for w in self.writers.values():
            w.close()
        for name, tmp in self.tmp.items():
            if ok:
                os.replace(tmp, self.paths[name])
            else:
                tmp.unlink(missing_ok=True)
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
    executor: Any = None,
    on_exchanges: Callable[[int, pa.RecordBatch], None] | None = None,
) -> IngestStats:
    """Read capture files (format v1) and write the ingest tables to ``out_dir``.

    ``paths``: files and folders, as for :func:`replay.capture.files.discover`. ``out_dir``:
    created if missing; ``exchanges.parquet``, ``tools.parquet`` and ``ingest_errors.parquet``
    are (over)written there, all three always, with the schemas of :mod:`replay.tables` (an empty
    table when nothing went to it), each under a temporary name until the last batch is in, then
    renamed into place. ``batch_rows``: records per batch (also cut at about :data:`_FLUSH_BYTES`
    of lines). ``progress``: called with the number of bytes just read from disk (compressed), for a
    progress bar. ``redact``: hash message text (``--redact``, see :mod:`replay.capture.redact`);
    secrets are dropped whatever its value. ``max_line_bytes``: a longer line (decompressed bytes)
    is read past without being held and becomes an ``ingest_errors`` row ``line-too-long``.
    ``executor``: what runs :func:`ingest_batch` on the batches when it is not this process, given
    by the runner (:class:`replay.runner.ingest.PoolIngest`, the ``--jobs`` pool; use
    :func:`replay.runner.ingest.ingest` to get one): an object with ``part_bytes`` (the batches
    are then read in parts of about that many bytes, :func:`_batches`) and ``run(batches, spec,
    write, out_dir)``, which calls ``write(result, source)`` for every batch in reading order with
    the result :func:`ingest_batch` gives; the rows, their order, the row groups and the counts do
    not depend on it. None: every batch is parsed here. Records of formats other than capture-v1
    are parsed in this process whatever the executor (their readers keep state across records);
    this module knows nothing of processes. ``on_exchanges(key, batch)``: called after each row group of
    ``exchanges.parquet`` is written, with its index in the file (0, 1, ...) and its rows (a
    record batch of ``request_json`` as ``string_view``, ``tools_json`` dictionary-encoded, else
    :data:`replay.tables.EXCHANGES`), as ``replay audit`` starts its stages on them
    (:mod:`replay.runner.overlap`); what it raises stops the ingest.

    Reading stays in this process: a zstd or gzip stream cannot be decompressed from the middle
    (zstd frames can, but writers put a whole capture in one frame), so one file is split into
    batches of lines after decompression, and the batches are what runs in parallel.

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
    skipped: list[dict] = []
    files = discover(paths, skipped)
    with line_limit(max_line_bytes), _fewer_collections(), _system_allocator():  # every reader's open_lines reads with this limit
        stats = _ingest_planned(plan(files, capture_format), files, out_dir, batch_rows, progress, redact, max_line_bytes, tokenizer, filters, executor,
                                on_exchanges)
    stats.skipped_files = skipped
    return stats


def _batches(planned: list, stats: IngestStats, batch_rows: int, on_read: Callable[[int], None], tokenizer: Any,
             max_line_bytes: int, formats: dict[str, int], flush_bytes: int = _FLUSH_BYTES,
             per_file: dict[str, list[int]] | None = None, part_bytes: int | None = None) -> Iterator[LineBatch]:
    """Every planned file read into :class:`LineBatch` es, in reading order (a batch holds one
    file's records, at most ``batch_rows`` and about ``flush_bytes`` of them); ``stats`` counts
    lines, blank lines and skipped records as they are read, and ``per_file`` (when given) the
    same three per planned file: ``source -> [lines, blank, skipped]``. ``part_bytes``: yield each
    batch in parts of about that many bytes instead (the batches are the same: a part never spans
    two), each with ``last`` False but the batch's last one (which may be empty), so that no more
    than a part is held here at a time."""
    for pf in planned:
        source = source_name(pf.path)
        if pf.consumed:  # a Batch output read with its input (its lines count under the input's file)
            formats[pf.fmt] = formats.get(pf.fmt, 0) + 1
            continue
        lines0, blank0, skipped0 = stats.lines, stats.blank_lines, stats.skipped
        formats[pf.fmt] = formats.get(pf.fmt, 0) + 1
        batch = LineBatch(source)
        rows = size_of = 0  # records and bytes of the batch so far (of all its parts)
        last_line = 0
        last_end = 0
        prev_at: tuple | None = None  # (source, line) of the previous record: one line may hold several
        try:
            for unit in read_units(pf, on_read=on_read, tokenizer=tokenizer):
                line_no, offset, raw = unit.line, unit.offset, unit.raw
                at = (unit.source or source, line_no)
                if line_no is not None and at == prev_at:
                    stats.shared_line_records += 1
                prev_at = at
                size = raw.length if isinstance(raw, LongLine) else len(raw)
                if line_no is not None and (unit.source or source) == source:
                    last_line, last_end = line_no, (offset or 0) + size + 1
                stats.lines += 1
                if isinstance(raw, LongLine) and not (unit.blank or unit.skipped):
                    batch.entries.append(("error", line_no, offset, bytes(raw), "line-too-long",
                                          f"line of {raw.length} bytes is longer than the limit of {max_line_bytes} bytes "
                                          f"(--max-line-bytes); read past, not parsed", unit.source))
                elif unit.blank:
                    stats.blank_lines += 1
                    continue
                elif unit.skipped:
                    stats.skipped += 1
                    if unit.skip_reason:
                        stats.skipped_by[unit.skip_reason] = stats.skipped_by.get(unit.skip_reason, 0) + 1
                    continue
                elif unit.error is not None:
                    batch.entries.append(("error", line_no, offset, raw, unit.error.reason, unit.error.detail, unit.source))
                elif unit.v1_raw:
                    batch.entries.append(("line", line_no, offset, raw))
                else:
                    batch.entries.append(("record", line_no, offset, raw, unit.record, "v1" if unit.v1_raw else pf.fmt, unit.source))
                batch.nbytes += len(raw)
                rows += 1
                size_of += len(raw)
                if rows >= batch_rows or size_of >= flush_bytes:
                    yield batch
                    batch = LineBatch(source)
                    rows = size_of = 0
                elif part_bytes is not None and batch.nbytes >= part_bytes:
                    batch.last = False
                    yield batch
                    batch = LineBatch(source)
        except StreamFault as fault:
            stats.lines += 1
            batch.entries.append(("error", fault.line_no, fault.byte_offset, fault.partial, fault.reason, fault.detail, None))
        except OSError as exc:
            stats.lines += 1
            batch.entries.append(("error", last_line + 1, last_end, b"", "unreadable-file", f"{type(exc).__name__}: {exc}", None))
        if per_file is not None:
            mine = per_file.setdefault(source, [0, 0, 0])
            mine[0] += stats.lines - lines0
            mine[1] += stats.blank_lines - blank0
            mine[2] += stats.skipped - skipped0
        if batch.entries or rows:  # rows: the batch's earlier parts were yielded, this is its (empty) last
            yield batch


def _without_exchanges(read: dict[str, list[int]], written: dict[str, list[int]]) -> list[dict[str, Any]]:
    """The files of ``read`` (``source -> [lines, blank, skipped]``, reading order) that
    ``written`` (``source -> [exchanges, errors]``) holds no exchange of, as
    :attr:`IngestStats.files_without_exchanges` rows; ``filtered`` is what the invariant leaves."""
    out = []
    for source, (lines, blank, skipped) in read.items():
        exchanges, errors = written.get(source, (0, 0))
        if exchanges:
            continue
        filtered = max(lines - blank - skipped - errors, 0)
        out.append({"file": source, "lines": lines, "blank_lines": blank, "skipped": skipped, "errors": errors,
                    "filtered": filtered, "why": no_exchange_why(lines, blank, skipped, errors, filtered)})
    return out


def _ingest_planned(
    planned: list, files: list[Path], out_dir: str | os.PathLike, batch_rows: int,
    progress: Callable[[int], None] | None, redact: bool, max_line_bytes: int, tokenizer: Any,
    filters: Filters | None = None, executor: Any = None,
    on_exchanges: Callable[[int, pa.RecordBatch], None] | None = None,
) -> IngestStats:
    """The body of :func:`ingest` once the files are planned: batches read here, run through
    :func:`ingest_batch` (here, or by ``executor``: the runner's pool), written in reading order."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stats = IngestStats(files=len(files))

    def on_read(n: int) -> None:
        stats.bytes_read += n
        if progress is not None:
            progress(n)

    active = filters is not None and filters.active
    spec = IngestSpec(redact=redact, filters=filters if active else None)
    sink = _Sink(out, stats, filters.limit if active else None, on_exchanges)
    formats: dict[str, int] = {}
    read: dict[str, list[int]] = {}
    ok = False
    try:
        batches = _batches(planned, stats, batch_rows, on_read, tokenizer, max_line_bytes, formats, _FLUSH_BYTES, read,
                           executor.part_bytes if executor is not None else None)
        if executor is not None:
            executor.run(batches, spec, sink.write, out)
        else:
            for batch in batches:
                sink.write(ingest_batch(batch, spec), batch.source)
        ok = True
    finally:
        sink.close(ok)
        stats.formats = dict(sorted(formats.items()))
        stats.filtered = sum(sink.filtered.values())
        stats.files_without_exchanges = _without_exchanges(read, sink.per_file)
        if active:
            stats.filtered_by = {r: sink.filtered[r] for r in REASONS if r in sink.filtered}
    return stats
