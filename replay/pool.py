"""The ``--jobs N`` executor: a stage's batch function on a pool of processes.

:func:`map_batches` sends record batches of ``exchanges`` to a
:class:`concurrent.futures.ProcessPoolExecutor` of ``jobs`` processes started with ``spawn`` (no
state inherited from the parent: each process builds, once, what the run spec names, in
:func:`_init`, and an out-of-process side gets its own worker in each pool process). Results
come back as they finish, out of order; the caller writes them as part files keyed by batch.

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
from typing import Any, Callable, Iterable, Iterator

#: Batches in flight per pool process (bounds the parent's memory: each holds a record batch).
IN_FLIGHT = 2


def _init(spec: Any) -> None:
    """Pool process initializer (spawn-safe: it gets only the picklable spec): build the run's
    config once (:func:`replay.runspec.config_for`) and stop its out-of-process sides at exit."""
    import atexit
    import os

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from replay.runspec import close_built, config_for

    config_for(spec)
    atexit.register(close_built)
    import gc

    gc.freeze()  # the imports' and the config's objects: never garbage, so no collection walks them again (~4% of a batch)


def _call(function: Callable[[Any, Any], dict[str, Any]], batch: Any, spec: Any) -> dict[str, Any]:
    """Run ``function(batch, spec)`` in a pool process (``function`` pickles by reference); then
    give what the batch freed back to the OS (:func:`replay.pipeline.release_memory`): the pool
    processes count toward the audit's peak RSS."""
    from replay.pipeline import release_memory

    try:
        return function(batch, spec)
    finally:
        del batch
        release_memory()


def _pool(jobs: int, spec: Any) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_init, initargs=(spec,))


#: Pools kept open between stages (render, then re-stream), by (spec, jobs): a spawned process
#: costs about 0.6 CPU s to start (imports, the spec's renderers), so an audit starts each once.
_KEPT: dict[tuple[Any, int], ProcessPoolExecutor] = {}


def _shared(jobs: int, spec: Any) -> ProcessPoolExecutor:
    key = (spec, jobs)
    pool = _KEPT.get(key)
    if pool is None:
        pool = _KEPT[key] = _pool(jobs, spec)
    return pool


def close_pools() -> None:
    """Shut down the pools :func:`map_batches` kept open (their processes exit; each stops the
    out-of-process sides it started). Called at the end of an audit or stage command."""
    while _KEPT:
        _, pool = _KEPT.popitem()
        pool.shutdown(wait=True, cancel_futures=True)


def map_batches(
    function: Callable[[Any, Any], dict[str, Any]],
    batches: Iterable[tuple[int, Any]],
    spec: Any,
    jobs: int,
    on_failed: Callable[[int, Any, str], dict[str, Any]],
) -> Iterator[tuple[int, Any, dict[str, Any]]]:
    """Yield ``(key, batch, function(batch, spec))`` for every ``(key, batch)``, computed on
    ``jobs`` spawned processes, in the order they finish; at most ``jobs *`` :data:`IN_FLIGHT`
    batches are held at a time.

    ``spec``: a picklable run spec (:class:`replay.runspec.RunSpec`). ``on_failed(key, batch,
    message)``: the result for a batch whose process died twice (in the shared pool, then alone
    in a pool of its own); it runs in this process. An exception the function raises (a bug, not
    a dead process) propagates.
    """
    pool = _shared(jobs, spec)
    running: dict[Future, tuple[int, Any]] = {}
    it = iter(batches)
    ok = False
    try:
        exhausted = False
        while True:
            while not exhausted and len(running) < jobs * IN_FLIGHT:
                nxt = next(it, None)
                if nxt is None:
                    exhausted = True
                else:
                    running[pool.submit(_call, function, nxt[1], spec)] = nxt
            if not running:
                ok = True
                return
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            orphans: list[tuple[int, Any]] = []
            for fut in finished:
                key, batch = running.pop(fut)
                try:
                    result = fut.result()
                except BrokenProcessPool:
                    orphans.append((key, batch))
                    continue
                yield key, batch, result
            if not orphans:
                continue
            # a process died and broke the pool: the batches still in flight end at once, each
            # with its result or BrokenProcessPool; those without one are run again, one by one
            for fut in list(running):
                key, batch = running.pop(fut)
                try:
                    result = fut.result()
                except BrokenProcessPool:
                    orphans.append((key, batch))
                    continue
                yield key, batch, result
            _KEPT.pop((spec, jobs), None)
            pool.shutdown(wait=True, cancel_futures=True)
            for key, batch in orphans:
                yield key, batch, _alone(function, key, batch, spec, on_failed)
            pool = _shared(jobs, spec)
    finally:
        if not ok:  # an exception or an abandoned generator: do not keep a pool in an unknown state
            _KEPT.pop((spec, jobs), None)
            pool.shutdown(wait=True, cancel_futures=True)


def _alone(
    function: Callable[[Any, Any], dict[str, Any]], key: int, batch: Any, spec: Any, on_failed: Callable[[int, Any, str], dict[str, Any]]
) -> dict[str, Any]:
    """``function(batch, spec)`` retried in a pool of one process; ``on_failed`` when that process
    dies too."""
    pool = _pool(1, spec)
    try:
        return pool.submit(_call, function, batch, spec).result()
    except BrokenProcessPool as exc:
        return on_failed(key, batch, f"WorkerError: the pool process died on this batch of {batch.num_rows} exchanges, twice ({exc})")
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
