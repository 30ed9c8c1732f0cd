"""Faults of the ``--jobs N`` pool (:mod:`replay.pool`) met from the outside: a pool process that
dies while the caller of :func:`replay.pool.map_batches` is busy with a result it was given."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest


def test_a_process_that_dies_while_the_caller_holds_a_result_is_retried_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool breaks while the consumer of ``map_batches`` is still writing the first result (as
    ingest writes Parquet between results): the next ``submit`` used to raise ``BrokenProcessPool``
    out of ``replay ingest --jobs 2`` (a traceback, no tables) when a pool process was SIGKILLed.
    Now every batch still gets its result: the killer alone through ``on_failed``, the others
    computed in the next pool, each exactly once."""
    from replay.capture.ingest import IngestSpec
    from replay.pool import PoolStats, close_pools, map_batches

    (tmp_path / "pool_killer.py").write_text(
        "import os, time\n"
        "def work(batch, spec):\n"
        "    if batch == 'kill':\n"
        "        time.sleep(0.3)\n"
        "        os._exit(9)\n"
        "    return {'value': batch}\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned pool processes import it too
    import pool_killer

    batches = [(0, "a"), (1, "kill"), (2, "b"), (3, "c"), (4, "d"), (5, "e"), (6, "f")]
    stats = PoolStats()
    got = {}
    try:
        for key, _batch, result in map_batches(pool_killer.work, iter(batches), IngestSpec(), 2,
                                               lambda k, b, msg: {"failed": msg}, stats):
            got[key] = result
            if len(got) == 1:
                time.sleep(1.5)  # the killer dies meanwhile; the pool is broken before the next submit
    finally:
        close_pools()
        sys.modules.pop("pool_killer", None)
    assert sorted(got) == list(range(7))
    assert {k: v for k, v in got.items() if k != 1} == {k: {"value": b} for k, b in batches if k != 1}
    assert got[1]["failed"].startswith("WorkerError: the pool process died on this batch")
    assert stats.restarts >= 1 and stats.failed == 1
