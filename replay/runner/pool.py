"""The ``--jobs N`` executor: a stage's batch function on a pool of processes.

:func:`map_batches` sends work items (a stage's: a reference to a slice of a row group of
``exchanges.parquet``, which the process reads and whose part files it writes itself,
:func:`replay.runner.driver.stage_part`; ingest's: a batch of capture lines) to a
:class:`concurrent.futures.ProcessPoolExecutor` of ``jobs`` processes started with ``spawn`` (no
state inherited from the parent: each process builds, once, what the run spec names, in
:func:`_init`, and an out-of-process side gets its own worker in each pool process). Results
come back as they finish, out of order (a stage's: the row counts of the parts its process wrote).

The pool is kept open for the next stage of the same spec (:func:`close_pools` ends it).
A pool process that dies (a plugin that segfaults or calls ``os._exit``, the OOM killer) breaks
the pool: every batch then in flight is run again, each alone in a fresh pool of one process, so
the one that killed it is found; a batch that fails alone too gets ``on_failed`` (its rows carry
the error) and the run goes on. Nothing here waits without end on a dead process: a broken pool
fails its futures at once (``BrokenProcessPool``).
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

#: Batches in flight per pool process (bounds the parent's memory when an item holds its rows, as
#: ingest's batches of lines do; a stage's items are row-group references, a few bytes each).
IN_FLIGHT = 2

#: A pool process gives what a batch freed back to the OS (:func:`replay.runner.memory.release_memory`)
#: only when its RSS is above this after the batch: below it the freed pages are what the next
#: batch reuses, where trimming after every batch made each batch fault them in again (more
#: system CPU for the same peak; figures: ``benchmarks/RESULTS.md``).
RELEASE_ABOVE = 128 << 20


def _init(spec: Any) -> None:
    """Pool process initializer (spawn-safe: it gets only the picklable spec): build the run's
    config once (:func:`replay.runspec.config_for`) and stop its out-of-process sides at exit."""
    import atexit
    import os

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from replay.runner.memory import arrow_without_pandas, glibc_allocators, single_threaded_arrow

    glibc_allocators()  # Arrow on glibc, a fixed mmap threshold: a batch's freed pages are reused, not kept per allocator
    arrow_without_pandas()  # pa.array would import pandas into every process, which no stage uses
    single_threaded_arrow()  # one process per core already: Arrow's own threads only kept memory
    from replay.runspec import close_built, config_for

    try:
        config_for(spec)
    except Exception as exc:  # noqa: BLE001 - a bad template or tokenizer: render_check reports it to the parent
        _INIT_ERROR[:] = [exc]  # (an initializer that raises breaks the pool with a traceback on stderr)
    atexit.register(close_built)
    parent = multiprocessing.parent_process()
    _exit_with_parent(parent.pid if parent is not None and parent.pid is not None else os.getppid())
    import signal

    signal.signal(signal.SIGINT, _quiet_interrupt)
    import gc

    gc.freeze()  # the imports' and the config's objects: never garbage, so no collection walks them again


#: The error :func:`_init` got building this pool process's config (at most one), for :func:`_render_words`.
_INIT_ERROR: list[BaseException] = []


def _render_words(spec: Any) -> tuple[str, Any, Any]:
    """A pool process's answer to :func:`render_check`: ``("ok", words, None)`` with the render
    setup's ``run.json`` words of its config (:meth:`replay.runspec.AuditConfig.set_render_words`),
    or ``("error", exception class, message)`` when building it failed."""
    from replay.runspec import config_for

    try:
        if _INIT_ERROR:
            raise _INIT_ERROR[0]
        cfg = config_for(spec)
    except Exception as exc:  # noqa: BLE001 - sent to the parent, which raises it
        return "error", type(exc), str(exc)
    return "ok", getattr(cfg, "render_words", None), None


def render_check(spec: Any, jobs: int) -> dict[str, Any] | None:
    """Ask the pool :func:`prestart` started for ``spec`` and ``jobs`` (started here if it was
    not) whether its processes could build the spec's renderers and tokenizer, waiting for the
    first process to have built them (start-up, imports, the tokenizer). Returns the
    render setup's words for ``run.json`` (:meth:`replay.runspec.AuditConfig.set_render_words`);
    None when the pool could not answer (a process died at start: the caller then builds them
    itself). Raises the error the pool process got, same class where it can be made from the
    message (else ValueError), e.g. ``ValueError("--tokenizer x: ...")``: what
    :func:`replay.runspec.build_config` raises in this process. This is how ``replay audit``
    checks the render options up front without loading them in its own process
    (:func:`replay.runner.plan.setup_render`)."""
    pool = _shared(jobs, spec)
    try:
        status, words, message = pool.submit(_render_words, spec).result()
    except BrokenProcessPool:
        return None
    if status == "ok":
        return words
    try:
        err = words(message)
    except Exception:  # noqa: BLE001 - a class whose constructor takes other arguments
        err = ValueError(message)
    raise err


def _quiet_interrupt(_signum: int, _frame: Any) -> None:
    """A pool process's SIGINT handler: Ctrl-C in a terminal reaches every process of the
    foreground group, and the parent (which gets it too) stops the run and the pool. Here it
    stops this process's out-of-process sides (:func:`replay.runspec.close_built`) and exits at
    once with 130, printing nothing: ``KeyboardInterrupt`` printed a traceback from each idle
    pool process (and one caught inside a batch left the process to read a half-written queue)
    under the parent's one-line ``interrupted`` message."""
    import os

    try:
        from replay.runspec import close_built

        close_built()
    finally:
        os._exit(130)


#: Seconds between a pool process's checks that the process that started it is alive.
PARENT_POLL = 0.5


def _exit_with_parent(parent: int) -> None:
    """Start a daemon thread that ends this pool process once ``parent`` (the pid that started it)
    is gone (``os.getppid()`` changes: the process was re-parented), stopping its out-of-process
    sides first (:func:`replay.runspec.close_built`). A ``ProcessPoolExecutor`` process otherwise
    waits on its call queue for ever when the parent is killed (SIGKILL, the OOM killer): each
    such ``replay`` left two idle processes and multiprocessing's resource tracker running."""
    import os
    import threading

    def watch() -> None:
        import time

        while os.getppid() == parent:
            time.sleep(PARENT_POLL)
        try:
            from replay.runspec import close_built

            close_built()
        finally:
            os._exit(1)

    threading.Thread(target=watch, name="replay-parent-watch", daemon=True).start()


@dataclass
class PoolStats:
    """What one stage's pool went through, for ``run.json`` (``executors``) and the report.

    ``restarts``: times the shared pool lost a process and was started again; ``retried``: batches
    run again, each alone in a pool of one process; ``failed``: batches whose process died alone
    too (their rows carry the error). ``workers``: per pool process (by pid), the out-of-process
    sides' worker restarts and incidents as that process last reported them (each pool process
    has its own worker per side, :mod:`replay.sides`)."""

    jobs: int = 1
    restarts: int = 0
    retried: int = 0
    failed: int = 0
    workers: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def worker_totals(self) -> dict[str, dict[str, Any]]:
        """``{side: {"restarts": n, "incidents": [...]}}`` summed over the pool processes."""
        out: dict[str, dict[str, Any]] = {}
        for per_side in self.workers.values():
            for side, got in per_side.items():
                tot = out.setdefault(side, {"restarts": 0, "incidents": []})
                tot["restarts"] += got.get("restarts", 0)
                tot["incidents"].extend(got.get("incidents", []))
        return out

    def as_dict(self) -> dict[str, Any]:
        """The stats as plain values (``run.json``)."""
        return {"engine": "pool", "jobs": self.jobs, "pool_restarts": self.restarts, "batches_retried": self.retried, "batches_failed": self.failed}


def merge_worker_meta(sides: dict[str, Any] | None, workers: dict[int, dict[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """``run.json`` ``sides`` (:func:`replay.sides.close_sides` of this process) with the worker
    restarts and incidents of the pool processes added to each out-of-process side (``workers``:
    :attr:`PoolStats.workers`, by pid, shared by a run's stages); ``pool_processes`` says how many
    pool processes ran a worker of that side."""
    if not sides or not workers:
        return sides
    totals = PoolStats(workers=workers).worker_totals()
    out = {s: dict(v) for s, v in sides.items()}
    for side, got in totals.items():
        if side in out and not out[side].get("in_process", True):
            m = out[side]
            m["restarts"] = (m.get("restarts") or 0) + got["restarts"]
            m["incidents"] = list(m.get("incidents") or []) + got["incidents"]
            m["pool_processes"] = sum(1 for per in workers.values() if side in per)
    return out


def _worker_counts(spec: Any) -> tuple[int, dict[str, dict[str, Any]]]:
    """``(pid, {side: {"restarts", "incidents"}})`` of this process's out-of-process side workers
    (those of the config :func:`replay.runspec.config_for` built for ``spec``), cumulative."""
    import os

    from replay.runspec import config_for

    sides = getattr(config_for(spec), "_sides", None)
    workers = getattr(sides, "workers", None) or {}
    return os.getpid(), {side: {"restarts": w.restarts, "incidents": list(w.incidents)} for side, w in workers.items()}


def _call(function: Callable[[Any, Any], dict[str, Any]], batch: Any, spec: Any) -> tuple[dict[str, Any], tuple[int, dict[str, Any]]]:
    """Run ``function(batch, spec)`` in a pool process (``function`` pickles by reference); return
    its result with this process's side-worker counts (:func:`_worker_counts`). Afterwards, when
    this process's RSS is above :data:`RELEASE_ABOVE`, give what the batch freed back to the OS
    (:func:`replay.runner.memory.release_memory`): the pool processes count toward the audit's peak RSS."""
    from replay.runner.memory import release_above

    try:
        got = function(batch, spec)
    finally:
        del batch
        release_above(RELEASE_ABOVE)
    return got, _worker_counts(spec)


def _size(item: Any) -> str:
    """What a batch holds, for a failure message: ``N exchanges`` (a record batch or a stage's
    reference, ``num_rows``), ``N records`` (ingest's batch of lines, ``entries``)."""
    inner = item[-1] if isinstance(item, tuple) and item else item
    if hasattr(inner, "num_rows"):
        return f"{inner.num_rows} exchanges"
    if hasattr(inner, "entries"):
        return f"{len(inner.entries)} records"
    return "its records"


def _pool(jobs: int, spec: Any) -> ProcessPoolExecutor:
    """A pool of ``jobs`` spawned processes running :func:`_init` on ``spec``. Raises ``OSError``
    naming ``--jobs`` when multiprocessing cannot make its locks (POSIX semaphores, which live in
    a writable ``/dev/shm``: a read-only or missing one raised a bare ``[Errno 30] Read-only file
    system``)."""
    try:
        return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_init, initargs=(spec,))
    except OSError as exc:
        raise OSError(exc.errno, f"cannot start the pool of {jobs} processes (--jobs {jobs}): Python's multiprocessing "
                                 f"could not create its semaphores ({exc.strerror or exc}; they need a writable /dev/shm); "
                                 "run with --jobs 1") from exc


#: Pools kept open between stages (render, then re-stream), by (spec, jobs): a spawned process
#: is dear to start (imports, the spec's renderers), so an audit starts each once.
_KEPT: dict[tuple[Any, int], ProcessPoolExecutor] = {}


def _shared(jobs: int, spec: Any) -> ProcessPoolExecutor:
    key = (spec, jobs)
    pool = _KEPT.get(key)
    if pool is None:
        pool = _KEPT[key] = _pool(jobs, spec)
    return pool


def _noop() -> None:
    """A work item that does nothing (:func:`prestart`)."""


#: The no-op work items :func:`prestart` sent to each kept pool, by (spec, jobs): done once a
#: process of the pool has started (:func:`started`).
_STARTING: dict[tuple[Any, int], list[Future]] = {}


def prestart(spec: Any, jobs: int) -> None:
    """Start the pool of ``spec`` with ``jobs`` processes now, without waiting for them: each
    imports replay and builds the spec's config (:func:`_init`) while this
    process goes on (``replay audit`` ingests meanwhile), and :func:`map_batches` with the same
    ``spec`` and ``jobs`` then finds them ready. :func:`close_pools` ends them as any kept pool.
    On a pool already kept (:func:`render_check` started its first process) the no-ops start the
    rest: the executor starts a process only for work that finds none idle."""
    pool = _shared(jobs, spec)
    _STARTING[(spec, jobs)] = [pool.submit(_noop) for _ in range(jobs)]


def started(spec: Any, jobs: int) -> bool:
    """False while the pool :func:`prestart` started for ``spec`` and ``jobs`` has no process
    ready yet (none has run its no-op: each is still importing and building the spec's config),
    so that a caller can do some of the work itself meanwhile (ingest parses its first items);
    True once one has, or when no prestarted pool is kept for them. Never blocks."""
    futures = _STARTING.get((spec, jobs))
    if futures is None or (spec, jobs) not in _KEPT:
        return True
    if any(f.done() for f in futures):
        del _STARTING[(spec, jobs)]
        return True
    return False


def close_pools() -> None:
    """Shut down the pools :func:`map_batches` kept open (their processes exit; each stops the
    out-of-process sides it started). Called at the end of an audit or stage command."""
    _STARTING.clear()
    while _KEPT:
        _, pool = _KEPT.popitem()
        pool.shutdown(wait=True, cancel_futures=True)


def _collect(futures: Iterable[Any], running: dict[Any, tuple[int, Any]], take: Callable[[Any], Any], orphans: list[tuple[int, Any]]) -> Iterator[tuple[int, Any, Any]]:
    """Yield ``(key, batch, result)`` for each of ``futures`` (removed from ``running``) whose
    process answered; append ``(key, batch)`` to ``orphans`` for each lost to a broken pool."""
    for fut in futures:
        key, batch = running.pop(fut)
        try:
            result = take(fut.result())
        except BrokenProcessPool:
            orphans.append((key, batch))
            continue
        yield key, batch, result


def map_batches(
    function: Callable[[Any, Any], dict[str, Any]],
    batches: Iterable[tuple[int, Any]],
    spec: Any,
    jobs: int,
    on_failed: Callable[[int, Any, str], dict[str, Any]],
    stats: PoolStats | None = None,
) -> Iterator[tuple[int, Any, dict[str, Any]]]:
    """Yield ``(key, batch, function(batch, spec))`` for every ``(key, batch)``, computed on
    ``jobs`` spawned processes, in the order they finish; at most ``jobs *`` :data:`IN_FLIGHT`
    batches are held at a time.

    ``spec``: a picklable run spec (:class:`replay.runspec.RunSpec`). ``on_failed(key, batch,
    message)``: the result for a batch whose process died twice (in the shared pool, then alone
    in a pool of its own); it runs in this process. An exception the function raises (a bug, not
    a dead process) propagates. ``stats`` (a :class:`PoolStats`) is updated as batches finish.
    """
    stats = stats if stats is not None else PoolStats()
    stats.jobs = jobs

    def take(result: Any) -> dict[str, Any]:
        got, (pid, counts) = result
        if counts:
            stats.workers[pid] = counts
        return got

    pool = _shared(jobs, spec)
    running: dict[Future, tuple[int, Any]] = {}
    it = iter(batches)
    ok = False
    pending: tuple[int, Any] | None = None  # a batch the broken pool refused: sent to the next pool
    try:
        exhausted = False
        while True:
            refused = False
            while not exhausted and len(running) < jobs * IN_FLIGHT:
                nxt, pending = (pending, None) if pending is not None else (next(it, None), None)
                if nxt is None:
                    exhausted = True
                    continue
                try:
                    running[pool.submit(_call, function, nxt[1], spec)] = nxt
                except BrokenProcessPool:  # a process died while this generator's caller held a result
                    pending, refused = nxt, True
                    break
            if not running and not refused:
                ok = True
                return
            orphans: list[tuple[int, Any]] = []
            if not refused:
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                yield from _collect(finished, running, take, orphans)
                if not orphans:
                    continue
            # a process died and broke the pool: the batches still in flight end at once, each
            # with its result or BrokenProcessPool; those without one are run again, one by one
            yield from _collect(list(running), running, take, orphans)
            _KEPT.pop((spec, jobs), None)
            pool.shutdown(wait=True, cancel_futures=True)
            stats.restarts += 1
            for key, batch in orphans:
                stats.retried += 1
                yield key, batch, _alone(function, key, batch, spec, on_failed, stats, take)
            pool = _shared(jobs, spec)
    finally:
        if not ok:  # an exception or an abandoned generator: do not keep a pool in an unknown state
            _KEPT.pop((spec, jobs), None)
            pool.shutdown(wait=True, cancel_futures=True)


def _alone(
    function: Callable[[Any, Any], dict[str, Any]],
    key: int,
    batch: Any,
    spec: Any,
    on_failed: Callable[[int, Any, str], dict[str, Any]],
    stats: PoolStats,
    take: Callable[[Any], dict[str, Any]],
) -> dict[str, Any]:
    """``function(batch, spec)`` retried in a pool of one process; ``on_failed`` when that process
    dies too (counted in ``stats.failed``)."""
    pool = _pool(1, spec)
    try:
        return take(pool.submit(_call, function, batch, spec).result())
    except BrokenProcessPool as exc:
        stats.failed += 1
        return on_failed(key, batch, f"WorkerError: the pool process died on this batch of {_size(batch)}, twice ({exc})")
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
