"""Executors: what moves a stage's batches through its batch function.

A stage (:class:`replay.stages.stage.Stage`) is a function ``(pa.RecordBatch, RunSpec) -> {table:
pa.Table}`` over batches of ``exchanges.parquet``; an executor only moves batches. The in-process
driver and the process pool are :func:`replay.runner.driver.run_stage`; this module runs the same
functions on Ray (``--engine ray``), the way the pool does::

    exchanges.parquet footer --replay.runner.driver.batch_refs--> one BatchRef per batch (row group, rows)
        --> one Ray task per batch: (stage, run folder, BatchRef, RunSpec)
            the task reads its rows from RUN/exchanges.parquet (replay.runner.driver.run_ref) and
            writes its own part files RUN/.parts/<table>/part-NNNNNN.parquet (write_atomic)
        --> back to the driver: the part's key, row counts, the task's pid and node (a few bytes)
        --> the driver joins each table's parts in key order into RUN/<table>.parquet
            (replay.runner.driver.merge_parts), as the local path does

so ``--engine ray`` writes the same part files, under the same keys, as ``--jobs``, and the same
tables; no batch's rows pass through the driver. Parts of an interrupted run of the same stage,
spec and capture are kept and their batches not run again (:func:`replay.runner.driver.stage_fingerprint`),
as on the local path. Ray is imported only here and only when asked for: the default path never
pays its import or start-up.

Ray runs where ``--ray-address`` says (``ray://host:10001``, ``auto``, or a GCS ``host:6379``); without
one, replay starts a local Ray with ``num_cpus`` CPUs (``--jobs``) and stops it at the end. On a
cluster the workers read ``RUN/exchanges.parquet`` and write ``RUN/.parts/`` themselves, so the
run folder must be a path every node reads and writes (a shared filesystem), and the files a
RunSpec names (chat template, tokenizer, plugins) must exist at the same paths on every node, with
replay installed in the workers' environment.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path
from typing import Any, Callable, Optional

#: ``--engine`` values.
ENGINES = ("local", "ray")


class EngineError(ValueError):
    """An engine that cannot run: Ray not installed, a cluster that cannot be reached, a config
    without a plain run spec (the message says which, and what to do)."""


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise EngineError(f"--engine ray needs Ray: pip install 'replay-audit[ray]' ({exc})") from None
    return ray


#: Ray's own retries of a batch's task whose worker process died (then the driver writes the
#: batch's rows with the error, :meth:`RayEngine.run_stage`): one, as the process pool retries a
#: batch once (:mod:`replay.runner.pool`).
TASK_RETRIES = 1


def ray_part(stage: Any, run_dir: str, ref: Any, spec: Any) -> dict[str, Any]:
    """One batch of a stage in a Ray worker (the body of the task :class:`RayEngine` submits):
    read the batch ``ref`` (a :class:`replay.runner.driver.BatchRef`) of ``run_dir``'s
    ``exchanges.parquet`` a slice at a time, run ``stage.function`` on it with ``spec`` (the run's
    :class:`replay.runspec.RunSpec`; its objects are built once per worker process,
    :func:`replay.runspec.config_for`) and write its part files in ``RUN/.parts/`` here, in the
    worker (:func:`replay.runner.driver.stage_part`, what a pool process runs).

    A function that raises is run once more; when it raises again the batch's rows are
    :func:`replay.stages.stage.failed_batch`'s, carrying the error (as for a pool process that died
    twice), written here too, and the audit goes on.

    Returns only metadata, never rows: ``{"key": batch key, "rows": {table: row count},
    "exchanges": the batch's exchanges, "failed": bool, "pid": this worker's pid, "node": its Ray
    node id (hex)}``."""
    from replay.runner.driver import stage_part

    item = (stage, run_dir, ref)
    failed = False
    try:
        rows = stage_part(item, spec)
    except Exception:  # noqa: BLE001 - retried once, then the rows carry it
        try:
            rows = stage_part(item, spec)
        except Exception as exc:  # noqa: BLE001
            from replay.stages.stage import failed_batch
            from replay.runner.driver import read_batch, write_parts
            from replay.runspec import config_for

            failed = True
            batch = read_batch(Path(run_dir) / "exchanges.parquet", ref, stage.columns)
            message = f"WorkerError: the Ray task failed on this batch of {ref.rows} exchanges, twice ({type(exc).__name__}: {exc})"
            rows = write_parts(Path(run_dir), stage, ref.key, failed_batch(stage, batch, config_for(spec), message))
    node = None
    try:
        import ray

        node = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - called outside a Ray worker (a test): no node
        pass
    return {"key": ref.key, "rows": rows, "exchanges": ref.rows, "failed": failed, "pid": os.getpid(), "node": node}


class RayEngine:
    """Runs stages on Ray, one task per batch. ``address``: a running cluster (None: start a
    local Ray with ``num_cpus`` CPUs, None meaning all of this machine's). Ray starts at the first
    :meth:`run_stage` and, when this engine started it, stops at :meth:`close` (or at exit).

    ``returned`` holds what the tasks of the last :meth:`run_stage` sent back to the driver
    (:func:`ray_part`'s metadata, one dict per batch run, in the order they finished)."""

    def __init__(self, address: Optional[str] = None, num_cpus: Optional[int] = None) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self._started = False
        self._ray: Any = None
        self.returned: list[dict[str, Any]] = []

    def _init(self) -> Any:
        ray = self._ray or _import_ray()
        self._ray = ray
        if ray.is_initialized():  # a caller's own Ray (a notebook, a test): used as it is
            return ray
        try:
            if self.address:
                ray.init(address=self.address, log_to_driver=False, logging_level="warning")
            else:
                # address="local": a new local Ray, never one that $RAY_ADDRESS points at
                ray.init(address="local", num_cpus=self.num_cpus, include_dashboard=False, log_to_driver=False, logging_level="warning")
        except Exception as exc:  # ConnectionError, RuntimeError, ValueError from Ray
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray"
            raise EngineError(f"--engine ray: could not start or reach {where}: {exc}") from None
        self._started = True
        atexit.register(self.close)
        return ray

    def run_stage(self, run_dir: Path, stage: Any, cfg: Any, progress: Optional[Callable[[int], None]] = None) -> dict[str, int]:
        """Run ``stage`` (:class:`replay.stages.stage.Stage`) over the run's exchanges on Ray: one
        task per batch of :func:`replay.runner.driver.batch_refs` (``cfg.batch_rows`` rows within a
        row group), each reading its rows from ``RUN/exchanges.parquet`` and writing its own
        part files (:func:`ray_part`); then join each table's parts in key order into
        ``RUN/<table>.parquet`` (:func:`replay.runner.driver.merge_parts`), as
        :func:`replay.runner.driver.run_stage` does, and remove the parts. ``cfg``: an
        :class:`replay.runspec.AuditConfig` built from a RunSpec (``cfg.spec``), which is what
        the workers get. ``progress`` is called with each batch's exchange count as it ends (and
        at once for the batches a resumed run already has). Returns ``{table: rows}``. Raises
        :class:`EngineError` (Ray missing or unreachable, no spec).

        Resume: parts of the same stage, spec and ``exchanges.parquet``
        (:func:`replay.runner.driver.stage_fingerprint`) are kept, their batches not run again.
        A batch the stage function raised on twice gets the error on its rows in its worker
        (:func:`ray_part`); a batch whose worker process died (Ray retries the task
        :data:`TASK_RETRIES` time) gets them here (:func:`replay.stages.stage.failed_batch`), as the
        pool's parent does. Both are counted in ``cfg.executor_stats[stage.name]``
        (``batches_failed``)."""
        from replay.runner.driver import batch_refs, count_exchanges, merge_parts, read_batch, remove_parts, resumable_keys, stage_fingerprint, write_parts
        from replay.stages.stage import failed_batch

        spec = getattr(cfg, "spec", None)
        if spec is None:
            raise EngineError("--engine ray runs a RunSpec (plain options) on its workers; this config was built from objects (replay.runspec.build_config makes one)")
        ray = self._init()
        run_dir = Path(run_dir).resolve()  # the path every node opens
        path = run_dir / "exchanges.parquet"
        count_exchanges(run_dir)  # FileNotFoundError for a folder that is not a run
        refs = batch_refs(path, cfg.batch_rows)
        done = resumable_keys(run_dir, stage, stage_fingerprint(run_dir, stage, cfg))
        for ref in refs:
            if ref.key in done and progress:
                progress(ref.rows)
        stats: dict[str, Any] = {"engine": "ray", "batches_failed": 0}
        cfg.executor_stats[stage.name] = stats
        task = ray.remote(max_retries=TASK_RETRIES, scheduling_strategy="SPREAD")(ray_part)
        stage_ref, spec_ref = ray.put(stage), ray.put(spec)
        pending = {task.remote(stage_ref, str(run_dir), ref, spec_ref): ref for ref in refs if ref.key not in done}
        self.returned = []
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for obj in ready:
                ref = pending.pop(obj)
                try:
                    meta = ray.get(obj)
                except ray.exceptions.RayError as exc:  # the worker process died, past Ray's retry
                    batch = read_batch(path, ref, stage.columns)  # made here, the rows carrying the error
                    message = f"WorkerError: the Ray worker process died on this batch of {ref.rows} exchanges, twice ({type(exc).__name__})"
                    write_parts(run_dir, stage, ref.key, failed_batch(stage, batch, cfg, message))
                    meta = {"key": ref.key, "failed": True}
                self.returned.append(meta)
                stats["batches_failed"] += bool(meta["failed"])
                if progress:
                    progress(ref.rows)
        keys = [ref.key for ref in refs]
        counts = {table: merge_parts(run_dir, table, keys) for table in stage.tables}
        remove_parts(run_dir, stage)
        return counts

    def close(self) -> None:
        """Stop the local Ray this engine started (a cluster, or a Ray the caller started, is left running)."""
        if self._started and self._ray is not None:
            self._started = False
            self._ray.shutdown()
