"""The whole job as one library call: ingest, render, re-stream, count, report.

``replay audit`` is a thin layer over :func:`audit`; a user can call it from Python the same way::

    from replay.audit import audit
    from replay.runspec import AuditConfig
    result = audit(["captures/"], "runs/pr-123", AuditConfig())
    print(result.report.path.read_text())

A run folder holds the Parquet tables, ``run.json`` (options, versions, inputs, ingest statistics,
seconds per stage) and ``report.md``.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, ContextManager

from replay.capture import discover
from replay.runner.ingest import ingest  # the capture readers, with the --jobs pool of the runner
from replay.capture.files import file_size, input_record
from replay.capture.storage import RemoteObject
from replay.capture.detect import FORMATS
from replay.capture.filters import Filters, describe_kept
from replay.runner.memory import arrow_without_pandas, release_memory, single_threaded_arrow
from replay.stages.stage import RENDER, STREAM
from replay.runspec import AuditConfig
from replay.stages.stream import chunking_plan
from replay.runner.driver import count_exchanges, run_render, run_stream
from replay.stages.validate import validate_specs
import pyarrow as pa

from replay.runner.pool import PoolStats, close_pools
from replay.sides import close_sides
from replay.report import headlines, markdown_report, run_report_queries, write_exemplars, write_html_report
from replay.report.html import html_queries
from replay.tables import TABLES
from replay.term import visible
import duckdb

from replay.sql import DuckDBSettings, QueryError, connect, out_of_memory_message, raise_interrupt
from replay.runner.progress import StageFn  # stage(name, total) -> advance(n): how a caller shows progress
# the run folder lives in replay.runner.runfolder (light to import: `replay ingest` needs it, not the rest of this module)
from replay.runner.runfolder import (  # noqa: F401 - re-exported
    RUN_FILES, RunExistsError, RunFolder, RunInUseError, RunLock, changed_inputs_message, check_out_folder, clear_run, existing_run, filters_meta,
    incomplete_stage, mark_incomplete, prepare_out, read_meta, versions, write_meta,
)


def _no_progress(name: str, total: int | None) -> ContextManager[Callable[[int], None]]:
    return nullcontext(lambda n: None)


@dataclass
class AuditResult:
    """What :func:`audit` returns: the run folder, its metadata (``run.json``), the report
    (path, query results, headlines)."""

    run_dir: Path
    meta: dict[str, Any]
    report: Report
    seconds: dict[str, float] = field(default_factory=dict)


def executor_meta(cfg: Any, sides: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """``(sides, executors)`` for ``run.json``: ``sides`` (:func:`replay.sides.close_sides` of this
    process) with the worker restarts and incidents of the pool processes added
    (:func:`replay.runner.pool.merge_worker_meta`), and per stage what its executor went through
    (``{"render": {"engine": "pool", "jobs": 2, "pool_restarts": 1, "batches_retried": 2,
    "batches_failed": 1}, ...}``; ``engine`` ``local`` for this process, ``ray`` with
    ``batches_failed`` for Ray)."""
    from replay.runner.pool import merge_worker_meta

    executors = {stage: (s.as_dict() if hasattr(s, "as_dict") else dict(s)) for stage, s in cfg.executor_stats.items()}
    return merge_worker_meta(sides, cfg.pool_workers), executors


@dataclass
class Report:
    """A written ``report.md``: its path, the report queries' results (Arrow tables by query name)
    and the headline sentences, for a caller to print without running the queries again."""

    path: Path
    results: dict[str, pa.Table]
    headlines: list[str]


def write_report(run_dir: Path, meta: dict[str, Any], *, redact: bool = True, duckdb_settings: DuckDBSettings | None = None) -> Report:
    """(Re)write ``report.md``, ``report.html`` (:mod:`replay.report.html`) and ``exemplars/``
    from the run's tables, running each report query once. ``redact``: mask message text in the exemplars (:func:`replay.mask.redact_text`).
    ``duckdb_settings``: DuckDB's memory limit, threads and spill folder (:class:`replay.sql.DuckDBSettings`).
    Raises :class:`replay.sql.QueryError` (a ValueError) for a table DuckDB cannot read, and when
    DuckDB runs out of memory (the message names ``--duckdb-memory``); KeyboardInterrupt for a
    Ctrl-C or SIGTERM while a query runs (DuckDB raised ``RuntimeError: Query interrupted``
    instead: :func:`replay.sql.raise_interrupt`)."""
    con = connect(run_dir, duckdb_settings)
    try:
        results = run_report_queries(con)
        page = html_queries(con)
        lines = headlines(con, meta, results)
        exemplars = write_exemplars(con, Path(run_dir), meta, results["smallest_failures"], redact=redact)
        path = Path(run_dir) / "report.md"
        # control characters of captured text made visible: `cat report.md` must not act on a terminal
        path.write_text(visible(markdown_report(con, meta, results, lines, exemplars)), encoding="utf-8")
    except (RuntimeError, duckdb.Error) as exc:  # a query outside run_sql (exemplars, headlines): Ctrl-C, SIGTERM, out of memory
        if isinstance(exc, duckdb.OutOfMemoryException):
            raise QueryError(out_of_memory_message(exc, con)) from exc
        raise_interrupt(exc)
    finally:
        con.close()
    # the page is built once DuckDB has given its memory back, so altair's import and the charts never add to DuckDB's peak
    release_memory()
    write_html_report(None, Path(run_dir), meta, results, lines, exemplars, page)
    return Report(path=path, results=results, headlines=lines)


def audit(
    paths: list[str | Path | RemoteObject],
    out: str | Path,
    cfg: AuditConfig,
    stage: StageFn = _no_progress,
    capture_format: str | None = None,
    *,
    redact: bool = True,
    hash_text: bool = False,
    max_line_bytes: int = 32 << 20,
    filters: Filters | None = None,
    duckdb_settings: DuckDBSettings | None = None,
    engine: Any = None,
    force: bool = False,
    skipped: list[dict] | None = None,
) -> AuditResult:
    """Ingest ``paths`` into the run folder ``out``, render, re-stream, and write ``report.md``.

    ``paths``: capture files and folders, ``s3://`` / ``gs://`` / ``az://`` URIs, or what
    :func:`replay.capture.discover` returned for them (listed objects are not listed again).
    ``skipped``: the paths that discovery left out (its ``skipped`` list, when the caller
    discovered ``paths``), recorded in ``run.json`` ``ingest.skipped_files`` with those this call's
    discovery leaves out.

    ``cfg``: the sides and chunkings (:class:`replay.runspec.AuditConfig`). ``stage``: optional
    progress callback (see :data:`StageFn`). ``capture_format``: read every capture as this format
    (:data:`replay.capture.detect.FORMATS`; None: detect per file); server logs holding only token
    ids are decoded with ``cfg.tokenizer``. ``redact``: mask message text in the exemplars.
    ``hash_text`` (``--redact``), ``max_line_bytes``: passed to :func:`replay.capture.ingest` as
    ``redact`` and ``max_line_bytes`` (hash message text at ingest; longest line read).
    ``filters``: which exchanges to keep (:class:`replay.capture.filters.Filters`), recorded with
    what they kept in ``run.json`` ``filters`` (:func:`filters_meta`).
    ``duckdb_settings``: the report queries' memory limit, threads and spill folder. ``engine``:
    what runs the render and re-stream stages (:class:`replay.runner.executors.RayEngine`; None: this
    process or the ``--jobs`` pool, :func:`replay.runner.driver.run_stage`).
    ``force``: replace a run ``out`` already holds (:func:`prepare_out`).
    Returns an :class:`AuditResult`.
    Raises FileNotFoundError for a missing input path (or bucket, object, prefix),
    :class:`replay.capture.storage.StorageError` for a URI that cannot be listed, ValueError for a
    bad serializer or parser spec, :class:`RunExistsError` for an ``out`` holding another run
    without ``force`` and :class:`replay.runner.runfolder.RunInUseError` while another command writes
    ``out`` (its :class:`replay.runner.runfolder.RunLock`, held until this returns), before anything is
    written; faults in the data itself never raise (they are rows).
    """
    folder = RunFolder(out, "replay audit")
    folder.check()
    folder.lock()  # RunInUseError while another command writes the folder
    with folder:
        arrow_without_pandas()  # ingest's pa.array calls would import pandas into this process
        single_threaded_arrow()  # Arrow's thread pools only kept what they freed
        try:
            validate_specs(cfg)  # starts the out-of-process sides' workers, kept for both stages
            skipped = list(skipped or [])
            files = discover(paths, skipped)
            if capture_format is not None and capture_format not in FORMATS:
                raise ValueError(f"--capture-format {capture_format}: unknown format; known: {', '.join(FORMATS)}")
            setup_render(files, cfg, engine)  # a bad template or tokenizer fails here, before anything is written
            fingerprint = audit_fingerprint(files, cfg, capture_format, hash_text, max_line_bytes, filters)
            state = folder.prepare(fingerprint, force, files)
        except BaseException:
            close_pools()
            close_sides(cfg)
            raise
        try:
            return _run(files, folder, cfg, stage, capture_format, redact, hash_text, max_line_bytes, filters, duckdb_settings, engine, state,
                        skipped)
        finally:
            close_pools()  # the --jobs processes kept from render to re-stream
            close_sides(cfg)


#: Capture bytes (on disk) from which ``replay audit --jobs N`` starts its pool before ingesting.
PRESTART_BYTES = 8 << 20


def _pool_renders(files: list[Path], cfg: AuditConfig, engine: Any) -> bool:
    """Whether the stages will run on the ``--jobs`` pool started before ingest: no ``--engine``,
    a run spec, ``--jobs`` above 1, and captures of at least :data:`PRESTART_BYTES` (a smaller
    one may make a single batch, which runs in this process)."""
    if engine is not None or cfg.spec is None or cfg.jobs <= 1:
        return False
    return sum(file_size(f) or 0 for f in files) >= PRESTART_BYTES


def setup_render(files: list[Path], cfg: AuditConfig, engine: Any = None) -> None:
    """Check a deferred render setup (:func:`replay.runspec.build_config` ``load=False``, what
    ``replay audit`` makes) before any work, building the renderers and tokenizer only where
    they render: when the stages will run on the ``--jobs`` pool (:func:`_pool_renders`), the
    pool's first process is started now and its build is the check
    (:func:`replay.runner.pool.render_check`; its ``run.json`` words are recorded), and this process
    never loads them (a chat template and a tokenizer: memory and start-up time in this process
    for nothing, since the pool renders); else (``--jobs 1``, a small capture,
    ``--engine ray``) they are built here. A stage that still runs here (a filtered run left one
    batch) builds them at its first use. Nothing for a config that is not deferred. Raises
    ValueError (:class:`replay.errors.UsageError` for an unknown renderer name) naming the
    option, as :func:`replay.runspec.build_config` does."""
    if not cfg.deferred:
        return
    if _builds_render_objects(cfg) and _pool_renders(files, cfg, engine):
        from replay.runner.pool import render_check

        words = render_check(cfg.spec, cfg.jobs)  # starts the pool's first process; _run starts what else it needs
        if words is not None:
            cfg.set_render_words(words)
            return
    cfg.load_render()


def _builds_render_objects(cfg: AuditConfig) -> bool:
    """Whether ``cfg``'s spec names render objects worth building only where they render (a chat
    template, a tokenizer, a renderer or reference encoder: :data:`replay.runspec.BUILT_FROM` but
    ``--date``). Without one, building here is cheap and imports nothing, where asking the
    pool (:func:`replay.runner.pool.render_check`) kept ingest waiting for its first process to start."""
    from replay.runspec import BUILT_FROM

    spec = cfg.spec
    return spec is not None and any(getattr(spec, name, None) for name in BUILT_FROM if name != "date")


def _overlapping(cfg: AuditConfig) -> bool:
    """Whether the stages run during ingest when they run on the pool (:mod:`replay.runner.overlap`):
    ``cfg.overlap`` (not ``--no-overlap``) and no ``--parallel-ingest`` (the pool parses then)."""
    return bool(cfg.overlap) and not cfg.parallel_ingest


def _start_overlap(run_dir: Path, cfg: AuditConfig) -> Any:
    """An :class:`replay.runner.overlap.Overlap` of ``cfg``'s stages during ingest into ``run_dir``
    (starting ``--jobs`` - 1 pool processes), or None when its work folder cannot be made (the
    stages then run after ingest)."""
    from replay.runner.overlap import Overlap

    try:
        return Overlap(run_dir, cfg)
    except OSError:
        return None


def audit_fingerprint(
    files: list[Path], cfg: AuditConfig, capture_format: str | None, hash_text: bool, max_line_bytes: int, filters: Any = None
) -> str:
    """SHA-256 hex of what an audit's results depend on: each capture's path, size and mtime (an
    object in a bucket: its URI, size and ETag), the
    ingest options (filters included) and the run spec (``cfg.spec`` without how it is executed,
    :meth:`replay.runspec.RunSpec.results_key`; else ``cfg.options``) with the batch size. An
    interrupted audit resumes only under the same fingerprint."""
    import hashlib

    inputs = []
    for f in files:
        if isinstance(f, RemoteObject):  # an object in a bucket: its URI, listed size and ETag
            inputs.append([f.uri, f.size, f.etag])
            continue
        try:
            st = Path(f).stat()
            inputs.append([str(Path(f).resolve()), st.st_size, st.st_mtime_ns])
        except OSError:
            inputs.append([str(f), None, None])
    what = {
        "inputs": inputs,
        "capture_format": capture_format,
        "hash_text": hash_text,
        "max_line_bytes": max_line_bytes,
        "filters": repr(filters),
        "spec": cfg.spec.results_key() if cfg.spec is not None else json.dumps(cfg.options, sort_keys=True, default=str),
        "batch_rows": cfg.batch_rows,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def _run(
    files: list[Path], folder: RunFolder, cfg: AuditConfig, stage: StageFn, capture_format: str | None,
    redact: bool = True, hash_text: bool = False, max_line_bytes: int = 32 << 20, filters: Filters | None = None,
    duckdb_settings: DuckDBSettings | None = None, engine: Any = None, state: dict[str, Any] | None = None,
    skipped: list[dict] | None = None,
) -> AuditResult:
    run_dir = folder.path
    state, resumed = folder.start(state)  # a previous run's renders/streams must never join this run's exchanges
    seconds: dict[str, float] = {}
    meta = folder.meta
    meta.update({
        "options": {**cfg.options, "capture_format": capture_format},
        "versions": versions(),
        "inputs": [input_record(f) for f in files],
    })

    folder.mark("ingest")
    t0 = time.perf_counter()
    if state.get("ingest") is not None and (run_dir / "exchanges.parquet").is_file():  # resumed after ingest ended
        meta["ingest"] = state["ingest"]
        if state.get("filters") is not None:
            meta["filters"] = state["filters"]
    else:
        folder.save_state(state)  # from here an interrupted audit can be resumed
        # the stages start on each row group as ingest writes it, on all but one of the pool's
        # processes (replay.runner.overlap); with --parallel-ingest the pool parses the lines instead
        # the pool starts before ingest when the stages will run on it, so that its processes'
        # start-up overlaps this one's reading: N-1 of them by the Overlap's drains (the last one
        # when ingest ends: idle, it only added to the peak), else all N now
        on_pool = _pool_renders(files, cfg, engine)
        pooled = on_pool and cfg.parallel_ingest
        ingest_pool = PoolStats(workers=cfg.pool_workers) if pooled else None
        cfg.executor_stats["ingest"] = ingest_pool if pooled else {"engine": "local", "jobs": 1}
        overlap = _start_overlap(run_dir, cfg) if on_pool and _overlapping(cfg) else None
        if on_pool and overlap is None:
            from replay.runner.pool import prestart

            prestart(cfg.spec, cfg.jobs)
        try:
            with stage("ingest", sum(file_size(f) or 0 for f in files)) as advance:
                # row groups of at most batch_rows exchanges: each stage batch is then one row group,
                # which a pool process reads alone (replay.runner.driver.batch_refs); with the stages' pool
                # started, its processes parse the capture's lines too (the same rows and row groups)
                stats = ingest(files, run_dir, progress=advance, capture_format=capture_format, tokenizer=cfg.ingest_tokenizer(),
                               redact=hash_text, max_line_bytes=max_line_bytes, filters=filters, batch_rows=cfg.batch_rows,
                               jobs=cfg.jobs if pooled else 1, pool_spec=cfg.spec if pooled else None, pool_stats=ingest_pool,
                               on_exchanges=overlap.offer if overlap is not None else None)
            if overlap is not None:
                cfg.executor_stats["during_ingest"] = overlap.finish()
        finally:
            if overlap is not None:
                overlap.close()
        if skipped and dataclasses.is_dataclass(stats):  # what discovery left out of the paths given (ingest saw the files only)
            stats.skipped_files = [*skipped, *stats.skipped_files]
        meta["ingest"] = dataclasses.asdict(stats) if dataclasses.is_dataclass(stats) else dict(stats)
        if filters is not None and filters.active:
            meta["filters"] = filters_meta(filters, stats)
        folder.save_state({**state, "ingest": meta["ingest"], "filters": meta.get("filters")})
    seconds["ingest"] = time.perf_counter() - t0
    release_memory()  # what ingest freed (the pool processes and the report need it)
    if resumed:
        meta["resumed"] = True

    n = count_exchanges(run_dir)
    folder.mark("render")
    t0 = time.perf_counter()
    with stage("render", n) as advance:
        run_render(run_dir, cfg, progress=advance) if engine is None else engine.run_stage(run_dir, RENDER, cfg, advance)
    seconds["render"] = time.perf_counter() - t0
    release_memory()

    folder.mark("re-stream")
    t0 = time.perf_counter()
    with stage("re-stream", n) as advance:
        run_stream(run_dir, cfg, progress=advance) if engine is None else engine.run_stage(run_dir, STREAM, cfg, advance)
    seconds["stream"] = time.perf_counter() - t0
    close_pools()  # the report runs here, in this process: the pool processes' memory is given back first
    release_memory()
    # interpreter and Python version of each side, worker restarts (the pool processes' included),
    # and what the executors went through (pool restarts, batches retried and failed)
    meta["sides"], meta["executors"] = executor_meta(cfg, close_sides(cfg))
    meta["chunkings"] = chunking_plan(cfg)  # which sides ran which chunkings
    folder.mark("report")

    t0 = time.perf_counter()
    meta["seconds"] = seconds
    report = write_report(run_dir, meta, redact=redact, duckdb_settings=duckdb_settings)
    seconds["report"] = time.perf_counter() - t0
    folder.finish(audit=True)  # run.json without the mark; the audit is complete: nothing to resume
    return AuditResult(run_dir=run_dir, meta=meta, report=report, seconds=seconds)
