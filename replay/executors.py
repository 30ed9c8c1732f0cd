"""Executors: what moves a stage's record batches through its batch function.

A stage (:class:`replay.pipeline.Stage`) is a function ``(pa.RecordBatch, RunSpec) -> {table:
pa.Table}`` over batches of ``exchanges.parquet``; an executor only moves batches. The in-process
driver and the process pool are :func:`replay.pipeline.run_stage`; this module adds the same
functions on Ray Data (``--engine ray``)::

    exchanges.parquet --ray.data.read_parquet--> map_batches(stage function, RunSpec)
        --> one row per (batch, table): the table's rows as Arrow IPC
        --> the driver writes each as a part file (atomically) in batch order, then joins them
            into RUN/<table>.parquet (replay.pipeline.merge_parts)

so ``--engine ray`` writes the same part files, in the same order, as ``--jobs``. Ray is imported
only here and only when asked for: the default path never pays its import or start-up.

Ray runs where ``--ray-address`` says (``ray://host:10001``, ``auto``, or a GCS ``host:6379``); without
one, replay starts a local Ray with ``num_cpus`` CPUs (``--jobs``) and stops it at the end. On a
cluster the workers read ``RUN/exchanges.parquet`` themselves, so the run folder must be a path
every node sees (a shared filesystem), and the files a RunSpec names (chat template, tokenizer,
plugins) must exist at the same paths on every node, with replay installed in the workers'
environment.
"""

from __future__ import annotations

import atexit
import logging
from pathlib import Path
from typing import Any, Callable, Optional

import pyarrow as pa
import pyarrow.parquet as pq

#: ``--engine`` values.
ENGINES = ("local", "ray")


class EngineError(ValueError):
    """An engine that cannot run: Ray not installed, a cluster that cannot be reached, a config
    without a plain run spec (the message says which, and what to do)."""


def _import_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise EngineError(f"--engine ray needs Ray Data: pip install 'replay-audit[ray]' ({exc})") from None
    return ray


def _to_batch(table: pa.Table, schema: pa.Schema | None = None) -> pa.RecordBatch:
    """One record batch of ``table``'s rows (Ray hands map_batches a ``pa.Table``)."""
    table = table.combine_chunks()
    batches = table.to_batches()
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=schema or table.schema)
    return batches[0] if len(batches) == 1 else pa.RecordBatch.from_struct_array(pa.concat_arrays([b.to_struct_array() for b in batches]))


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


#: Ray's own retries of a map task whose worker process died (then its block is dropped and the
#: driver writes the batch's rows with the error, :meth:`RayEngine.run_stage`): one, as the
#: process pool retries a batch once (:mod:`replay.pool`).
TASK_RETRIES = 1


def apply_stage(batch: pa.Table, stage: Any, spec: Any) -> pa.Table:
    """The Ray Data ``map_batches`` function: ``stage.function`` on one batch of exchanges, its
    tables packed as rows ``(table, rows, exchanges, failed, ipc)`` (table name, its row count,
    the batch's exchange count, whether the function failed on it, the table as Arrow IPC stream
    bytes) in ``stage.tables`` order.

    ``batch``: a ``pa.Table`` of the stage's exchanges columns; ``spec``: the run's
    :class:`replay.runspec.RunSpec` (its objects are built once per worker process,
    :func:`replay.runspec.config_for`). A function that raises is run once more; when it raises
    again the batch's rows are :func:`replay.pipeline.failed_batch`'s, carrying the error (as for
    a pool process that died twice), and the audit goes on."""
    records = _to_batch(batch)
    failed = False
    try:
        got = stage.function(records, spec)
    except Exception:  # noqa: BLE001 - retried once, then the rows carry it
        try:
            got = stage.function(records, spec)
        except Exception as exc:  # noqa: BLE001
            from replay.pipeline import failed_batch
            from replay.runspec import config_for

            failed = True
            message = f"WorkerError: the Ray task failed on this batch of {records.num_rows} exchanges, twice ({type(exc).__name__}: {exc})"
            got = failed_batch(stage, records, config_for(spec), message)
    return pa.table(
        {
            "table": pa.array(list(stage.tables), pa.string()),
            "rows": pa.array([got[t].num_rows for t in stage.tables], pa.int64()),
            "exchanges": pa.array([batch.num_rows] * len(stage.tables), pa.int64()),
            "failed": pa.array([failed] * len(stage.tables), pa.bool_()),
            "ids": pa.array([records.column("exchange_id").to_pylist() if i == 0 else [] for i in range(len(stage.tables))], pa.list_(pa.string())),
            "ipc": pa.array([_ipc(got[t]) for t in stage.tables], pa.binary()),
        }
    )


class RayEngine:
    """Runs stages on Ray Data. ``address``: a running cluster (None: start a local Ray with
    ``num_cpus`` CPUs, None meaning all of this machine's). Ray starts at the first
    :meth:`run_stage` and, when this engine started it, stops at :meth:`close` (or at exit)."""

    def __init__(self, address: Optional[str] = None, num_cpus: Optional[int] = None) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self._started = False
        self._ray: Any = None

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
        """Run ``stage`` (:class:`replay.pipeline.Stage`) over the run's exchanges on Ray; write
        each table's parts and join them into ``RUN/<table>.parquet`` as
        :func:`replay.pipeline.run_stage` does (same part order: Ray keeps the batches in file
        order). ``cfg``: an :class:`replay.pipeline.AuditConfig` built from a RunSpec
        (``cfg.spec``), which is what the workers get. ``progress`` is called with each batch's
        exchange count as its result arrives. Returns ``{table: rows}``. Raises
        :class:`EngineError` (Ray missing or unreachable, no spec).

        A batch the stage function raised on twice comes back with the error on its rows
        (:func:`apply_stage`); a batch whose worker process died (Ray retries the task
        :data:`TASK_RETRIES` time) is dropped by Ray Data, and its exchanges' rows are made here
        with the error (:func:`replay.pipeline.failed_batch`). Both are counted in
        ``cfg.executor_stats[stage.name]`` (``batches_failed``)."""
        import shutil

        from replay.pipeline import merge_parts, part_name, parts_dir, write_atomic

        spec = getattr(cfg, "spec", None)
        if spec is None:
            raise EngineError("--engine ray runs a RunSpec (plain options) on its workers; this config was built from objects (replay.runspec.build_config makes one)")
        ray = self._init()
        run_dir = Path(run_dir)
        for table in stage.tables:
            shutil.rmtree(parts_dir(run_dir, table), ignore_errors=True)
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True  # parts in the file's batch order
        ctx.enable_progress_bars = False  # replay's own progress (replay.progress) reports the stage
        ctx.print_on_execution_start = False
        logging.getLogger("ray.data").setLevel(logging.ERROR)  # its notes ("progress bars disabled") are not replay's output
        ctx.max_errored_blocks = -1  # a block whose task died past its retry is dropped, not the audit: rows made below
        exchanges = run_dir / "exchanges.parquet"
        ds = ray.data.read_parquet(str(exchanges.resolve()), columns=list(stage.columns))
        out = ds.map_batches(
            apply_stage, fn_args=(stage, spec), batch_size=cfg.batch_rows, batch_format="pyarrow",
            max_retries=TASK_RETRIES,
        )
        keys: dict[str, list[int]] = {t: [] for t in stage.tables}
        stats = {"engine": "ray", "batches_failed": 0}
        cfg.executor_stats[stage.name] = stats
        covered = 0
        seen: list[list[str]] = []
        for block in out.iter_batches(batch_size=None, batch_format="pyarrow"):
            for row in block.to_pylist():
                table = row["table"]
                key = len(keys[table])
                write_atomic(parts_dir(run_dir, table) / part_name(key), _from_ipc(row["ipc"]))
                keys[table].append(key)
                if table == stage.tables[0]:
                    covered += row["exchanges"]
                    seen.append(row["ids"])
                    stats["batches_failed"] += bool(row["failed"])
                    if progress:
                        progress(row["exchanges"])
        lost = self._lost(exchanges, seen, covered)
        if lost:  # blocks Ray dropped (their worker died twice): their rows, with the error, made here
            from replay.pipeline import failed_batch

            for start in range(0, len(lost), cfg.batch_rows):
                ids = lost[start : start + cfg.batch_rows]
                batch = _to_batch(pq.read_table(exchanges, columns=list(stage.columns), filters=[("exchange_id", "in", ids)]))
                got = failed_batch(stage, batch, cfg, f"WorkerError: the Ray worker process died on this batch of {batch.num_rows} exchanges, twice")
                for table in stage.tables:
                    key = len(keys[table])
                    write_atomic(parts_dir(run_dir, table) / part_name(key), got[table])
                    keys[table].append(key)
                stats["batches_failed"] += 1
                if progress:
                    progress(batch.num_rows)
        counts = {table: merge_parts(run_dir, table, keys[table]) for table in stage.tables}
        for table in stage.tables:
            shutil.rmtree(parts_dir(run_dir, table), ignore_errors=True)
        try:
            (run_dir / ".parts").rmdir()
        except OSError:
            pass
        return counts

    @staticmethod
    def _lost(exchanges: Path, seen: list[list[str]], covered: int) -> list[str]:
        """Exchange ids of ``exchanges.parquet`` no returned batch covered (``seen``), in file
        order; ``[]`` at once when ``covered`` is every row (the footer's count: no id is read)."""
        total = pq.ParquetFile(exchanges).metadata.num_rows
        if covered >= total:
            return []
        have = {i for ids in seen for i in ids}
        return [i for i in pq.read_table(exchanges, columns=["exchange_id"]).column("exchange_id").to_pylist() if i not in have]

    def close(self) -> None:
        """Stop the local Ray this engine started (a cluster, or a Ray the caller started, is left running)."""
        if self._started and self._ray is not None:
            self._started = False
            self._ray.shutdown()
