"""How an audit runs on this machine, decided once per run: whether the ``--jobs`` pool starts
before ingest (:data:`PRESTART_BYTES`), where the render objects are built (:func:`setup_render`),
ingest with the stages during it or its lines parsed on the pool (:func:`ingest_stage`), and what
the executors went through for ``run.json`` (:func:`executor_meta`). :func:`replay.audit.audit`
sequences the stages; this module decides how each runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay.capture.files import file_size
from replay.runner.ingest import ingest
from replay.runner.pool import PoolStats
from replay.runspec import AuditConfig


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


def ingest_stage(files: list[Path], run_dir: Path, cfg: AuditConfig, stage: Any, engine: Any = None, **options: Any) -> Any:
    """Ingest ``files`` into ``run_dir`` (:func:`replay.runner.ingest.ingest`, ``options``: its
    keyword arguments but the executor's) under the progress ``stage("ingest", bytes)``, the way
    ``cfg`` says to run it. When the stages will run on the ``--jobs`` pool (:func:`_pool_renders`)
    the pool starts before ingest, so that its processes' start-up overlaps this one's reading:
    N-1 of them run the stages on each row group as ingest writes it (:mod:`replay.runner.overlap`,
    unless ``--no-overlap``; the last one starts when ingest ends: idle, it only added to the
    peak), or with ``--parallel-ingest`` all N parse the capture's lines (the same rows and row
    groups). Row groups hold at most ``cfg.batch_rows`` exchanges: each stage batch is then one
    row group, which a pool process reads alone (:func:`replay.runner.driver.batch_refs`).
    Records in ``cfg.executor_stats`` what ran ingest (``ingest``) and the batches run during it
    (``during_ingest``). Returns :class:`replay.capture.ingest.IngestStats`; raises what ingest raises."""
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
            stats = ingest(files, run_dir, progress=advance, batch_rows=cfg.batch_rows, jobs=cfg.jobs if pooled else 1,
                           pool_spec=cfg.spec if pooled else None, pool_stats=ingest_pool,
                           on_exchanges=overlap.offer if overlap is not None else None, **options)
        if overlap is not None:
            cfg.executor_stats["during_ingest"] = overlap.finish()
    finally:
        if overlap is not None:
            overlap.close()
    return stats
