"""The stage driver: moves a stage's batches (:mod:`replay.stages`) over a run folder.

:func:`run_stage` cuts ``exchanges.parquet`` into record batches within its row groups
(:func:`batch_refs`; a pool process reads its own, :func:`read_batch`, :func:`read_slices`),
writes each result as a part file (atomically: a temporary name, then ``os.replace``), keeps a
fingerprint per stage so that an interrupted run resumes (:func:`stage_fingerprint`,
:func:`resumable_keys`), and joins the parts into the table's one file (``renders.parquet`` ...,
:func:`merge_parts`), so a capture of many GB goes through in bounded memory and a query never
reads a half-written table. Batches run in this process or on the ``--jobs`` pool
(:mod:`replay.runner.pool`); Ray (:mod:`replay.runner.executors`) uses the same part files.
One concern at about 450 lines: the part-file protocol (names, fingerprints, resume, merge) is
one contract between the local and the Ray executors.
"""

from __future__ import annotations

import hashlib
import json
import os
import pyarrow as pa
import pyarrow.parquet as pq
import shutil

from dataclasses import dataclass
from pathlib import Path
from replay import tables
from replay.runspec import AuditConfig
from replay.sides import BATCH
from replay.stages.stage import RENDER, STREAM, Stage, failed_batch
from typing import Any, Callable, Iterator


def iter_exchanges(run_dir: Path, columns: list[str], batch_rows: int) -> Iterator[dict[str, Any]]:
    """Yield the exchanges of a run as dicts of ``columns``, one record batch in memory at a time."""
    pf = pq.ParquetFile(Path(run_dir) / "exchanges.parquet")
    for batch in pf.iter_batches(batch_size=batch_rows, columns=columns):
        yield from batch.to_pylist()


def count_exchanges(run_dir: Path) -> int:
    """Rows in a run's ``exchanges.parquet`` (from the Parquet footer, no data read).

    Raises FileNotFoundError when ``run_dir`` is not a run folder."""
    path = Path(run_dir) / "exchanges.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a run folder: no exchanges.parquet (run `replay ingest` or `replay audit` first)")
    return pq.ParquetFile(path).metadata.num_rows


def parts_dir(run_dir: Path, table: str) -> Path:
    """The folder of ``table``'s part files while its stage runs: ``RUN/.parts/<table>/``."""
    return Path(run_dir) / ".parts" / table


def part_name(key: int) -> str:
    """The file name of batch ``key``'s part (zero-padded, so names sort as keys)."""
    return f"part-{key:06d}.parquet"


def write_atomic(path: Path, table: pa.Table) -> None:
    """Write ``table`` to ``path`` as zstd Parquet under a temporary name in the same folder, then
    ``os.replace`` it into place: a reader sees the whole file or none (an interrupted write
    leaves only a ``.tmp-*`` file, which no reader opens)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def merge_parts(run_dir: Path, table: str, keys: list[int]) -> int:
    """Join ``table``'s part files (in ``keys`` order) into ``RUN/<table>.parquet``, written
    atomically (temporary name, then ``os.replace``); returns its row count. The parts stay
    (:func:`run_stage` removes them once every table of the stage is in place).

    One part is held at a time, read by ``pq.ParquetFile(...).read(use_threads=False)``: the
    dataset reader of ``pq.read_table`` left RSS behind it in the joining process and cost more
    CPU (figures: ``benchmarks/RESULTS.md``).
    Raises ValueError for a part whose schema is not the table's (a foreign or older file)."""
    schema = tables.TABLES[table]
    final = Path(run_dir) / f"{table}.parquet"
    tmp = final.with_name(f".tmp-{os.getpid()}-{final.name}")
    n = 0
    with pq.ParquetWriter(tmp, schema, compression="zstd") as w:
        for key in keys:
            part = pq.ParquetFile(parts_dir(run_dir, table) / part_name(key)).read(use_threads=False)
            if part.schema != schema:
                part = part.cast(schema)
            n += part.num_rows
            if part.num_rows:
                w.write_table(part)
            del part
    os.replace(tmp, final)
    return n


def merge_part(item: tuple[str, str, list[int]], spec: Any) -> int:
    """:func:`merge_parts` as a pool work item (``item`` = ``(run folder, table, keys)``; ``spec``
    unused): a stage's tables are joined by its pool processes, one table each."""
    run_dir, table, keys = item
    return merge_parts(Path(run_dir), table, keys)


def exchange_batches(run_dir: Path, columns: Any, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The run's ``exchanges.parquet`` as record batches of ``columns``, in file order: the
    batches of :func:`batch_refs` (batch ``i`` is part ``i`` of every table a stage writes)."""
    path = Path(run_dir) / "exchanges.parquet"
    for ref in batch_refs(path, batch_rows):
        yield read_batch(path, ref, columns)


@dataclass(frozen=True)
class BatchRef:
    """Where one batch of a stage lies in ``exchanges.parquet``: rows ``start`` to ``start +
    rows`` of row group ``row_group``. What the ``--jobs`` pool sends a process instead of the rows
    (a few bytes; the process reads them itself, :func:`read_batch`)."""

    key: int
    row_group: int
    start: int
    rows: int

    @property
    def num_rows(self) -> int:
        """The batch's exchanges (as ``pa.RecordBatch.num_rows``)."""
        return self.rows


def batch_refs(path: Path, batch_rows: int) -> list[BatchRef]:
    """The batches of a stage over ``exchanges.parquet`` at ``path``, from its footer alone (no
    data read): each row group cut into slices of ``batch_rows`` rows (the last one of a row
    group shorter), keyed 0, 1, ... in file order. A batch never spans two row groups, so a
    process reads one row group for it; ``replay audit`` ingests row groups of at most
    ``batch_rows`` rows (:func:`replay.capture.ingest`), one batch each. Empty row groups have none."""
    meta = pq.ParquetFile(path).metadata
    refs: list[BatchRef] = []
    for rg in range(meta.num_row_groups):
        n = meta.row_group(rg).num_rows
        for start in range(0, n, batch_rows):
            refs.append(BatchRef(len(refs), rg, start, min(batch_rows, n - start)))
    return refs


_OPEN: dict[str, Any] = {}  # {"key": (path, size, mtime_ns), "file": pq.ParquetFile}: the last file read_batch opened


def read_batch(path: Path, ref: BatchRef, columns: Any) -> pa.RecordBatch:
    """The rows of ``ref`` (:func:`batch_refs`) of ``exchanges.parquet`` at ``path``, ``columns``
    only, as one record batch: its row group read and sliced. The open file is kept for the next
    call on the same file (same path, size and mtime), as a pool process reads batch after batch."""
    table = _read_row_group(_open(path), ref.row_group, list(columns))
    if ref.start or ref.rows != table.num_rows:
        table = table.slice(ref.start, ref.rows)
    batches = table.combine_chunks().to_batches()
    if len(batches) == 1:
        return batches[0]
    return pa.RecordBatch.from_pylist([], schema=table.schema) if not batches else pa.RecordBatch.from_struct_array(
        pa.concat_arrays([b.to_struct_array() for b in batches])
    )


def _open(path: Path) -> pq.ParquetFile:
    """``exchanges.parquet`` at ``path`` opened (``tools_json`` read as a dictionary array: each
    tool list's text once), kept for the next call on the same file (same path, size, mtime)."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    if _OPEN.get("key") != key:
        _OPEN.clear()
        pf = pq.ParquetFile(path)
        if "tools_json" in pf.schema_arrow.names:
            pf = pq.ParquetFile(path, read_dictionary=["tools_json"])
        _OPEN.update(key=key, file=pf)
    return _OPEN["file"]


def stage_columns(columns: list[str], names: list[str], tools_nulls: Callable[[], int]) -> list[str]:
    """The ``exchanges`` columns a stage reads for its ``columns`` from a batch whose table has
    the columns ``names``: without ``tools_json`` for a table written before it existed, and with
    ``request_json`` (last) when ``tools_json`` is missing or ``tools_nulls()`` (the batch's count
    of null ``tools_json`` values, asked only when needed) is not 0, so that :func:`exchange_tools`
    decodes those rows' requests. The one rule for a row group of ``exchanges.parquet``
    (:func:`_row_group_columns`) and a batch still in memory (:mod:`replay.runner.overlap`)."""
    if "tools_json" not in columns:
        return columns
    if "tools_json" not in names:
        columns = [c for c in columns if c != "tools_json"]
        return columns + ["request_json"] if "request_json" not in columns else columns
    if "request_json" in columns:
        return columns
    return columns + ["request_json"] if tools_nulls() else columns


def _row_group_columns(pf: pq.ParquetFile, row_group: int, columns: list[str]) -> list[str]:
    """The columns :func:`_read_row_group` reads for ``columns`` in ``row_group`` of ``pf``, in its
    order (:func:`stage_columns`), known before any value is read: whether ``tools_json`` holds a
    null there comes from the row group's statistics (its column chunk is read to count them when
    the file has none)."""

    def nulls() -> int:
        rg = pf.metadata.row_group(row_group)  # leaf columns: a list column is several, so found by path
        leaf = next((rg.column(i) for i in range(rg.num_columns) if rg.column(i).path_in_schema == "tools_json"), None)
        stats = leaf.statistics if leaf is not None else None
        if stats is not None and stats.has_null_count:
            return stats.null_count
        return pf.read_row_group(row_group, columns=["tools_json"]).column(0).null_count

    return stage_columns(columns, pf.schema_arrow.names, nulls)


def read_slices(path: Path, ref: BatchRef, columns: Any, rows: int | None = None) -> Iterator[pa.RecordBatch]:
    """The batch ``ref`` of ``exchanges.parquet`` at ``path`` as consecutive record batches of
    ``rows`` rows (default :data:`SLICE_ROWS`; the last one shorter): the slices
    :data:`SLICE_ROWS` cuts from :func:`read_batch`'s batch, the same columns (:func:`_row_group_columns`)
    and values, but decoded from the row group a slice at a time
    (``ParquetFile.iter_batches``), so a process never holds a whole batch's request bodies."""
    rows = rows or SLICE_ROWS
    pf = _open(path)
    cols = _row_group_columns(pf, ref.row_group, list(columns))
    end = ref.start + ref.rows
    pos = 0
    pending: list[pa.RecordBatch] = []
    have = 0
    for b in pf.iter_batches(batch_size=rows, row_groups=[ref.row_group], columns=cols, use_threads=False):
        lo, hi = pos, pos + b.num_rows
        pos = hi
        if hi <= ref.start:
            continue
        if lo >= end:
            break
        b = b.slice(max(0, ref.start - lo), min(hi, end) - max(lo, ref.start))
        while b.num_rows:
            take = min(rows - have, b.num_rows)
            pending.append(b.slice(0, take))
            have += take
            b = b.slice(take)
            if have == rows:
                yield _joined(pending, cols)
                pending, have = [], 0
    if pending:
        yield _joined(pending, cols)


def _joined(pieces: list[pa.RecordBatch], cols: list[str]) -> pa.RecordBatch:
    """One record batch of ``pieces`` (consecutive, same schema), columns in ``cols`` order."""
    if len(pieces) == 1:
        b = pieces[0]
    else:
        b = pa.Table.from_batches(pieces).combine_chunks().to_batches()[0]
    return b if b.schema.names == cols else b.select(cols)


def run_ref(stage: "Stage", path: Path, ref: BatchRef, spec: Any) -> dict[str, pa.Table]:
    """``stage.function`` over the batch ``ref`` of ``exchanges.parquet`` at ``path``, one
    :func:`read_slices` slice at a time, the tables of the slices joined in order: the tables
    ``stage.function`` makes of :func:`read_batch`'s whole batch. Returns ``{table: pa.Table}``."""
    outs = [stage.function(b, spec) for b in read_slices(path, ref, stage.columns)]
    if not outs:  # a reference past its row group's end: the empty tables, as for an empty batch
        return stage.function(read_batch(path, ref, stage.columns), spec)
    if len(outs) == 1:
        return outs[0]
    return {t: pa.concat_tables([o[t] for o in outs]) for t in stage.tables}


def _read_row_group(pf: pq.ParquetFile, row_group: int, columns: list[str]) -> pa.Table:
    """Row group ``row_group`` of ``pf``, the columns :func:`_row_group_columns` names for
    ``columns`` (without ``tools_json`` for a file written before it existed; with
    ``request_json`` when ``tools_json`` is missing or holds a null there, so that
    :func:`exchange_tools` decodes those rows' requests)."""
    return pf.read_row_group(row_group, columns=_row_group_columns(pf, row_group, columns))


#: Exchanges a stage function gets at a time within a batch (:func:`run_ref`): the Python rows
#: of a slice (request bodies, prompts, completions) are alive together, so slices keep that
#: small whatever ``--batch-rows`` is (a lower peak at no more CPU). :data:`replay.sides.BATCH`
#: exchanges, so an out-of-process side still gets requests of its full size.
SLICE_ROWS = BATCH


def write_parts(run_dir: Path, stage: "Stage", key: int, got: dict[str, pa.Table]) -> dict[str, int]:
    """Write one batch's tables (``got``: ``{table: pa.Table}``, each of ``stage.tables``) as part
    ``key`` of each (:func:`write_atomic`); returns ``{table: rows}``."""
    for table in stage.tables:
        write_atomic(parts_dir(run_dir, table) / part_name(key), got[table])
    return {table: got[table].num_rows for table in stage.tables}


def stage_part(item: tuple["Stage", str, BatchRef], spec: Any) -> dict[str, int]:
    """The pool's unit of a stage (:func:`replay.runner.pool.map_batches`): ``item`` = ``(stage, run
    folder, ref)``; read the batch ``ref`` of the run's ``exchanges.parquet`` a slice at a time,
    run ``stage.function`` on each with ``spec`` (:func:`run_ref`) and write its part files here,
    in the pool process (atomically).
    Returns ``{table: rows}``: only counts cross back to the parent."""
    stage, run_dir, ref = item
    path = Path(run_dir) / "exchanges.parquet"
    return write_parts(Path(run_dir), stage, ref.key, run_ref(stage, path, ref, spec))


def stage_fingerprint(run_dir: Path, stage: Stage, cfg: AuditConfig) -> str:
    """What a stage's part files were made from, as a SHA-256 hex: the stage, the run spec
    (``cfg.spec``, else ``cfg.options``), the batch size and the ``exchanges.parquet`` they were cut
    from (size and mtime). Parts of another fingerprint are never reused."""
    ex = Path(run_dir) / "exchanges.parquet"
    st = ex.stat()
    what = {
        "stage": stage.name,
        "spec": cfg.spec.results_key() if cfg.spec is not None else json.dumps(cfg.options, sort_keys=True, default=str),
        "batch_rows": cfg.batch_rows,
        "exchanges": [st.st_size, st.st_mtime_ns],
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def resumable_keys(run_dir: Path, stage: Stage, fingerprint: str) -> set[int]:
    """The batch keys whose parts are all present for ``stage`` made with ``fingerprint`` (the local
    driver and :class:`replay.runner.executors.RayEngine` run only the others; part
    files are written atomically: present means complete). Parts of another fingerprint (or of
    none) are removed and the fingerprint recorded in ``RUN/.parts/<stage>.json``."""
    marker = Path(run_dir) / ".parts" / f"{stage.name}.json"
    try:
        same = json.loads(marker.read_text(encoding="utf-8")).get("fingerprint") == fingerprint
    except (OSError, ValueError):
        same = False
    if same:
        have = [{int(p.name[5:11]) for p in parts_dir(run_dir, t).glob("part-*.parquet")} for t in stage.tables]
        return set.intersection(*have) if have else set()
    for table in stage.tables:
        shutil.rmtree(parts_dir(run_dir, table), ignore_errors=True)
    mark_parts(run_dir, stage, fingerprint)
    return set()


def mark_parts(run_dir: Path, stage: Stage, fingerprint: str) -> None:
    """Record (atomically) that ``stage``'s part files in ``RUN/.parts/`` were made with
    ``fingerprint`` (:func:`stage_fingerprint`), in ``RUN/.parts/<stage>.json``: :func:`run_stage`
    then keeps them and runs only the batches that have none (:func:`resumable_keys`)."""
    marker = Path(run_dir) / ".parts" / f"{stage.name}.json"
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_name(f".tmp-{os.getpid()}-{marker.name}")
    tmp.write_text(json.dumps({"fingerprint": fingerprint}), encoding="utf-8")
    os.replace(tmp, marker)


def run_stage(
    run_dir: Path, stage: Stage, cfg: AuditConfig, progress: Callable[[int], None] | None = None, jobs: int | None = None
) -> dict[str, int]:
    """Run ``stage`` over every exchange of the run: cut ``exchanges.parquet`` into batches of at
    most ``cfg.batch_rows`` rows within its row groups (:func:`batch_refs`, from the footer), call
    ``stage.function(batch, spec)`` on each (in slices, :func:`run_ref`), write each result table as a part file
    (``RUN/.parts/<table>/part-NNNNNN.parquet``, atomically), then join each table's parts in key
    order into ``RUN/<table>.parquet`` (atomically) and remove the parts.

    ``jobs`` (default ``cfg.jobs``): with more than one, and more than one batch, the batches run
    on a pool of that many spawned processes (:func:`replay.runner.pool.map_batches`), which get the
    picklable ``cfg.spec`` and a :class:`BatchRef` per batch: each process reads its batch's row
    group itself and writes its parts (:func:`stage_part`), so only references and row counts
    cross between processes and this one holds no batch (a config built by hand, without a spec,
    runs here); a batch whose process died twice gets :func:`failed_batch`'s rows, made here. In
    this process the function gets ``cfg`` itself (its sides, opened by :func:`validate_specs`,
    are reused). The rows and their order do not depend on ``jobs``. What the pool went through
    (restarts, batches retried and failed, its processes' side-worker restarts) is kept in
    ``cfg.executor_stats[stage.name]`` and ``cfg.pool_workers`` (:func:`replay.runner.plan.executor_meta`
    puts it in ``run.json``).

    Resume: parts left by an interrupted run of the same stage, spec and ``exchanges.parquet``
    (:func:`stage_fingerprint`) are kept and their batches not run again. ``progress`` is called
    with the number of exchanges of each batch done. Returns ``{table: rows}``. Until the stage
    ends, a table's previous file (if any) is left as it was: a query never reads a half-written
    table.
    """
    run_dir = Path(run_dir)
    jobs = cfg.jobs if jobs is None else jobs
    path = run_dir / "exchanges.parquet"
    count_exchanges(run_dir)  # FileNotFoundError for a folder that is not a run
    refs = batch_refs(path, cfg.batch_rows)
    pooled = cfg.spec is not None and min(jobs, len(refs)) > 1
    done = resumable_keys(run_dir, stage, stage_fingerprint(run_dir, stage, cfg))
    keys = [ref.key for ref in refs]
    for ref in refs:
        if ref.key in done and progress:
            progress(ref.rows)
    todo = [ref for ref in refs if ref.key not in done]

    if pooled:
        from replay.runner.pool import PoolStats, map_batches

        def on_failed(key: int, item: Any, message: str) -> dict[str, int]:
            batch = read_batch(path, item[2], stage.columns)  # made here, the rows carrying the error
            return write_parts(run_dir, stage, key, failed_batch(stage, batch, cfg, message))

        stats = PoolStats(workers=cfg.pool_workers)
        cfg.executor_stats[stage.name] = stats  # as_dict() when recorded (replay.runner.plan.executor_meta)
        # the processes read their own batches and write their own parts: only (stage, run, ref)
        # goes out and {table: rows} comes back, so this process holds no batch
        items = ((ref.key, (stage, str(run_dir), ref)) for ref in todo)
        for key, item, _counts in map_batches(stage_part, items, cfg.spec, min(jobs, len(refs)), on_failed, stats):
            if progress:
                progress(item[2].rows)
        # the tables are joined by the pool's processes too, at once (one table each): this one
        # never reads a part; a join whose process died is made here
        joins = ((i, (str(run_dir), table, keys)) for i, table in enumerate(stage.tables))
        counts = {item[1]: n for _, item, n in map_batches(
            merge_part, joins, cfg.spec, min(jobs, len(refs)), lambda k, item, msg: merge_part(item, None), stats)}
    else:
        cfg.executor_stats[stage.name] = {"engine": "local", "jobs": 1}
        from replay.runner.memory import release_above
        from replay.runner.pool import RELEASE_ABOVE

        for ref in todo:
            write_parts(run_dir, stage, ref.key, run_ref(stage, path, ref, cfg))
            # as a pool process does after each batch (a lower peak at the same CPU)
            release_above(RELEASE_ABOVE)
            if progress:
                progress(ref.rows)
    if not pooled:
        counts = {table: merge_parts(run_dir, table, keys) for table in stage.tables}
    remove_parts(run_dir, stage)
    return counts


def remove_parts(run_dir: Path, stage: Stage) -> None:
    """Remove ``stage``'s part files and fingerprint from ``RUN/.parts/`` once its tables are
    joined (by :func:`run_stage` and :class:`replay.runner.executors.RayEngine`), and ``RUN/.parts/``
    itself when nothing else is left in it."""
    for table in stage.tables:
        shutil.rmtree(parts_dir(run_dir, table), ignore_errors=True)
    (Path(run_dir) / ".parts" / f"{stage.name}.json").unlink(missing_ok=True)
    try:
        (Path(run_dir) / ".parts").rmdir()
    except OSError:  # other stages' parts still there (an audit's own state), or never made
        pass


def run_render(run_dir: Path, cfg: AuditConfig, progress: Callable[[int], None] | None = None, jobs: int | None = None) -> int:
    """Write ``renders.parquet`` for every exchange of the run (:func:`run_stage` of
    :func:`render_batch`); returns the number of rows.

    ``progress`` is called with the number of exchanges done since the last call; ``jobs``: see
    :func:`run_stage`. Raises :class:`replay.tools.UnknownSerializerError` / :class:`replay.plugins.PluginError` /
    :class:`replay.sides.SideError` for a bad serializer spec or side, before any row is written.
    """
    return run_stage(run_dir, RENDER, cfg, progress, jobs)["renders"]


def run_stream(run_dir: Path, cfg: AuditConfig, progress: Callable[[int], None] | None = None, jobs: int | None = None) -> tuple[int, int]:
    """Write ``streams.parquet`` and ``calls.parquet`` (:func:`run_stage` of :func:`stream_batch`);
    returns their row counts. ``progress`` and ``jobs`` as for :func:`run_render`."""
    counts = run_stage(run_dir, STREAM, cfg, progress, jobs)
    return counts["streams"], counts["calls"]
