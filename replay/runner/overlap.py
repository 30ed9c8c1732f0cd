"""Render and re-stream while ingest still writes: the stages' pool at work on each row group of
``exchanges.parquet`` as soon as ingest has written it.

``replay audit --jobs N`` ingests in its own process (reading and decompressing a capture is
serial, :func:`replay.capture.ingest`) while the pool it started for the stages
(:func:`replay.runner.pool.prestart`) would wait: on 2 cores a third of the audit's wall time ran on one
core. With :class:`Overlap`::

    ingest (this process) --row group k of exchanges.parquet written--> WORK/k.arrow
        (its stage columns as an Arrow IPC stream, SLICE_ROWS rows a record batch,
         WORK in /dev/shm when it has room, else in the run folder)
    N-1 pool processes (drain): claim the lowest waiting file, run the render and re-stream batch
        functions on it a slice at a time, write part k of each of their tables
        (RUN/.parts/<table>/part-k.parquet, atomically), remove the file, claim the next
    ingest done --> the drains stop after the file they hold; the parts they wrote are marked
        with each stage's fingerprint (replay.runner.driver.mark_parts) and replay.runner.driver.run_stage
        runs only the batches without parts, on the whole pool, as when it resumes an audit.

N-1 processes, not N: ingest holds a core, and its batch buffers are
alive with theirs. A row group that finds :data:`QUEUE` files waiting is not sent (ingest never
waits for the pool): the stages run it afterwards. Nothing here changes a row: a part is the one
:func:`replay.runner.driver.run_ref` writes for that batch (the same columns,
:func:`replay.runner.driver.stage_columns`; the same slices of :data:`replay.runner.driver.SLICE_ROWS`; the
same batch functions and spec), so the tables do not depend on whether a batch ran during ingest.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pyarrow as pa

from replay.stages.stage import RENDER, STREAM, Stage
from replay.runner.driver import SLICE_ROWS, batch_refs, mark_parts, parts_dir, part_name, stage_columns, stage_fingerprint, write_parts

#: The stages run during ingest, in the order each slice goes through them.
STAGES: tuple[Stage, ...] = (RENDER, STREAM)

#: Files waiting for a drain at most: a row group that finds this many is left to the stages.
#: Each is a batch's stage columns in /dev/shm.
QUEUE = 2

#: Seconds a drain sleeps when no file is waiting.
POLL = 0.02

#: The file in the work folder that tells the drains to stop.
STOP = "stop"


def _columns(names: list[str]) -> list[str]:
    """The ``exchanges`` columns of ``names`` that any of :data:`STAGES` may read, in ``names`` order."""
    want = {c for stage in STAGES for c in stage.columns} | {"request_json"}
    return [n for n in names if n in want]


def _claim(work: Path) -> tuple[int, Path] | None:
    """The waiting file of the lowest key in ``work``, renamed to a name of this process's own
    (``os.rename`` is atomic: of two drains, one wins it), as ``(key, path)``; None when none waits."""
    try:
        waiting = sorted(int(n[:-6]) for n in os.listdir(work) if n.endswith(".arrow") and n[:-6].isdigit())
    except OSError:
        return None
    for key in waiting:
        mine = work / f".claimed-{os.getpid()}-{key}"
        try:
            os.rename(work / f"{key}.arrow", mine)
        except FileNotFoundError:  # another drain claimed it first
            continue
        return key, mine
    return None


def run_file(run_dir: Path, key: int, path: Path, spec: Any) -> int:
    """Run :data:`STAGES` on the batch in ``path`` (an Arrow IPC stream :meth:`Overlap.offer`
    wrote: one record batch per slice, ``tools_nulls`` in its schema metadata) and write part
    ``key`` of each stage's tables in ``run_dir``. Returns the batch's exchanges (rows).

    Each record batch is read into memory alone (no mapping of the file: its pages would count in
    this process's RSS) and given to each stage's function with the columns :func:`replay.runner.driver.stage_columns` names for the whole
    batch, as :func:`replay.runner.driver.run_ref` gives a row group's slices."""
    outs: dict[str, list[dict[str, pa.Table]]] = {stage.name: [] for stage in STAGES}
    rows = 0
    with pa.OSFile(str(path)) as fh:
        reader = pa.ipc.open_stream(fh)
        schema = reader.schema
        nulls = int((schema.metadata or {}).get(b"tools_nulls", b"0"))
        cols = {stage.name: stage_columns(list(stage.columns), schema.names, lambda: nulls) for stage in STAGES}
        for batch in reader:
            rows += batch.num_rows
            for stage in STAGES:
                outs[stage.name].append(stage.function(batch.select(cols[stage.name]), spec))
            del batch
    for stage in STAGES:
        got = outs.pop(stage.name)
        tables = got[0] if len(got) == 1 else {t: pa.concat_tables([o[t] for o in got]) for t in stage.tables}
        write_parts(Path(run_dir), stage, key, tables)
    return rows


def write_batch_file(batch: pa.RecordBatch, path: Path) -> int:
    """Write the columns of ``batch`` (rows of ``exchanges`` as ingest has them,
    :func:`replay.capture.ingest` ``on_exchanges``) that :data:`STAGES` read to ``path``, as the
    Arrow IPC stream :func:`run_file` reads: a record batch per :data:`replay.runner.driver.SLICE_ROWS`
    rows, ``request_json`` as ``string`` (as Parquet gives it back, so that
    :func:`replay.stages.rows.exchange_rows` takes the same path), and the batch's count of null
    ``tools_json`` in the schema metadata (``tools_nulls``). Returns the bytes written. Raises
    ``OSError`` when ``path`` cannot be written (a full /dev/shm)."""
    names = _columns(batch.schema.names)
    table = batch.select(names)
    nulls = table.column(names.index("tools_json")).null_count if "tools_json" in names else 0
    i = names.index("request_json")
    schema = table.schema.set(i, pa.field("request_json", pa.string())).with_metadata({b"tools_nulls": str(nulls).encode()})
    with pa.OSFile(str(path), "wb") as fh:
        with pa.ipc.new_stream(fh, schema) as w:
            for start in range(0, table.num_rows, SLICE_ROWS):
                part = table.slice(start, SLICE_ROWS)
                # each slice's own bytes only: a slice of a string_view column holds the whole
                # batch's data buffers, which the IPC writer wrote out again for every slice
                w.write_batch(part.set_column(i, "request_json", part.column(i).cast(pa.string())))
        return fh.tell()


def drain(item: tuple[str, str], spec: Any) -> list[tuple[int, int]]:
    """A pool work item (:func:`replay.runner.pool._call`): ``item`` = ``(run folder, work folder)``.
    Claim the waiting files of the work folder one at a time (:func:`_claim`) and run each
    (:func:`run_file`) until the folder holds :data:`STOP` or is gone; returns ``[(key, rows)]``
    of the batches done. A batch that raises is left to the stages (its parts are not all written,
    so :func:`replay.runner.driver.run_stage` runs it again and its own fault handling applies)."""
    from replay.runner.memory import release_above
    from replay.runner.pool import RELEASE_ABOVE

    run_dir, work = Path(item[0]), Path(item[1])
    done: list[tuple[int, int]] = []
    while work.is_dir() and not (work / STOP).exists():
        claimed = _claim(work)
        if claimed is None:
            time.sleep(POLL)
            continue
        key, path = claimed
        try:
            done.append((key, run_file(run_dir, key, path, spec)))
        except Exception:  # noqa: BLE001 - the stage runs this batch again, with its retries and error rows
            for stage in STAGES:
                for table in stage.tables:
                    (parts_dir(run_dir, table) / part_name(key)).unlink(missing_ok=True)
        finally:
            path.unlink(missing_ok=True)
            release_above(RELEASE_ABOVE)
    return done


class Overlap:
    """The render and re-stream stages of ``cfg`` (an :class:`replay.runspec.AuditConfig` with a
    run spec and ``jobs`` > 1) run during ingest into ``run_dir``, on ``jobs - 1`` processes of
    the stages' pool (:func:`replay.runner.pool._shared`; they start as each gets its drain, and the
    others at :meth:`finish`: an idle process during ingest added to the audit's peak). :meth:`offer` is ingest's ``on_exchanges``
    (:func:`replay.capture.ingest`); :meth:`finish`, once ingest has renamed
    ``exchanges.parquet`` into place, stops the drains and marks their parts;
    :meth:`close` (also on an error) removes the work folder.

    Raises ``OSError`` when the work folder cannot be made. Parts of these stages left in
    ``run_dir`` by an earlier, interrupted ingest are removed first: only this ingest's are marked."""

    def __init__(self, run_dir: Path, cfg: Any) -> None:
        from replay.runner.ingest import _remove_stale_work_dirs, _shm_dir
        from replay.runner.pool import _call, _shared

        self.run_dir = Path(run_dir)
        self.cfg = cfg
        for stage in STAGES:
            for table in stage.tables:
                shutil.rmtree(parts_dir(self.run_dir, table), ignore_errors=True)
            (self.run_dir / ".parts" / f"{stage.name}.json").unlink(missing_ok=True)
        where = _shm_dir(self.run_dir, (QUEUE + cfg.jobs) * (64 << 20))
        _remove_stale_work_dirs(where, "replay-stages")  # a SIGKILLed audit's, which it could not remove
        self.work = Path(tempfile.mkdtemp(prefix=f"replay-stages-{os.getpid()}-", dir=where))
        self.offered = self.sent = 0
        self.stopped = False  # no more offers taken (a drain ended, or a file could not be written)
        pool = _shared(cfg.jobs, cfg.spec)
        item = (str(self.run_dir), str(self.work))
        self.futures: list[Future] = [pool.submit(_call, drain, item, cfg.spec) for _ in range(max(1, cfg.jobs - 1))]

    def _waiting(self) -> int:
        return sum(1 for n in os.listdir(self.work) if n.endswith(".arrow") and not n.startswith("."))

    def offer(self, key: int, batch: pa.RecordBatch) -> None:
        """Row group ``key`` of ``exchanges.parquet`` was written with the rows ``batch``: queue
        its stage columns (:func:`write_batch_file`) for a drain, unless :data:`QUEUE` files
        already wait or the drains ended (then the stages run it after ingest). Never raises for
        a full or failing work folder (it stops taking offers)."""
        self.offered += 1
        if self.stopped or any(f.done() for f in self.futures):
            self.stopped = True
            return
        if self._waiting() >= QUEUE:
            return
        tmp = self.work / f".tmp-{key}.arrow"
        try:
            write_batch_file(batch, tmp)
            os.replace(tmp, self.work / f"{key}.arrow")
            self.sent += 1
        except OSError:  # ENOSPC in a small /dev/shm, a folder removed under us: the stages do the rest
            tmp.unlink(missing_ok=True)
            self.stopped = True

    def finish(self) -> dict[str, int]:
        """Stop the drains (each ends after its current batch), wait for them, and mark the
        parts they wrote as the stages' own (:func:`replay.runner.driver.mark_parts`, with the
        fingerprint of the ``exchanges.parquet`` ingest has just written), after checking each
        against the file's row groups (a part whose row count is not its batch's is removed).
        Returns ``{"batches": done, "exchanges": their rows, "offered": row groups written,
        "sent": queued}``, for ``run.json``. A drain whose process died breaks the pool: it is
        dropped (the stages start a new one) and its batches are left to the stages."""
        from replay.runner.pool import _KEPT, _noop, _shared

        try:  # the rest of the pool starts now, while the drains end their batches (a process per no-op)
            pool = _shared(self.cfg.jobs, self.cfg.spec)
            for _ in range(self.cfg.jobs - len(self.futures)):
                pool.submit(_noop)
        except BrokenProcessPool:  # a drain's process died: handled below
            pass
        (self.work / STOP).touch()
        done: dict[int, int] = {}
        broken = False
        for fut in self.futures:
            try:
                got, (pid, counts) = fut.result()
            except BrokenProcessPool:
                broken = True
                continue
            if counts:
                self.cfg.pool_workers[pid] = counts
            done.update(got)
        if broken:
            pool = _KEPT.pop((self.cfg.spec, self.cfg.jobs), None)
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        path = self.run_dir / "exchanges.parquet"
        refs = {ref.key: ref.rows for ref in batch_refs(path, self.cfg.batch_rows)}
        for key, rows in done.items():
            if refs.get(key) != rows:  # not that batch of the file: never reused
                for stage in STAGES:
                    for table in stage.tables:
                        (parts_dir(self.run_dir, table) / part_name(key)).unlink(missing_ok=True)
        kept = {k: r for k, r in done.items() if refs.get(k) == r}
        for stage in STAGES:
            mark_parts(self.run_dir, stage, stage_fingerprint(self.run_dir, stage, self.cfg))
        self.close()
        return {"batches": len(kept), "exchanges": sum(kept.values()), "offered": self.offered, "sent": self.sent}

    def close(self) -> None:
        """Tell the drains to stop and remove the work folder (its waiting files too)."""
        try:
            (self.work / STOP).touch()
        except OSError:
            pass
        shutil.rmtree(self.work, ignore_errors=True)
