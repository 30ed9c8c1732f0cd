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

from replay.runner.pool import close_pools
# how each stage runs is the runner's (re-exported: part of this module's API)
from replay.runner.plan import PRESTART_BYTES, executor_meta, ingest_stage, setup_render  # noqa: F401
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
        # on the runner: the pool started before ingest when the stages will run on it, the stages
        # during ingest on its other processes, or the lines parsed on it (--parallel-ingest)
        stats = ingest_stage(files, run_dir, cfg, stage, engine, capture_format=capture_format, tokenizer=cfg.ingest_tokenizer(),
                             redact=hash_text, max_line_bytes=max_line_bytes, filters=filters)
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
