"""Ingest's parallel engine: the ``--jobs`` pool parsing capture-v1 lines for
:func:`replay.capture.ingest.ingest`, which reads, decompresses and writes in this process and
knows nothing of processes (its ``executor`` argument is a :class:`PoolIngest`).

A batch is cut into work items of about :data:`_POOL_ITEM_BYTES` of lines; an item's lines go to
a pool process through a file in ``/dev/shm`` (:class:`SharedLines`), the process runs the
ingest stage's batch function (:func:`replay.capture.ingest.ingest_batch`) and writes its three
tables back as Arrow IPC (:func:`ingest_shared`), and the parts of a batch are joined again
(:func:`_combine`) before the batch is written, so the tables are the very bytes of ``jobs=1``.
:func:`ingest` is ``replay.capture.ingest`` with ``jobs``: what the CLI and the audit call.
"""

from __future__ import annotations

import os
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa

from replay.capture.ingest import IngestSpec, IngestStats, LineBatch, failed_batch, ingest as _capture_ingest, ingest_batch

#: With ``jobs > 1`` the batches are the same (so are the row groups of the tables), and each is
#: cut into work items of about this many bytes of lines for the pool processes: three processes
#: hold batches at once (this one, reading and writing, and two parsing), so a pool process
#: parses a quarter of a batch at a time and holds about half the memory; the parts are
#: joined again before they are written (:func:`_combine`).
_POOL_ITEM_BYTES = 4 << 20


def _map(path: str, size: int) -> Any:
    """The first ``size`` bytes (at least 1) of the file at ``path`` memory-mapped read-only with
    its pages mapped at once (``MAP_POPULATE`` where there is one: one call instead of a page
    fault per 4 KiB; the file lives in ``/dev/shm``, so no disk is read): an ``mmap`` (slices
    are bytes), open until closed or collected. Raises ``OSError`` when the file cannot be
    opened or is shorter."""
    import mmap

    with open(path, "rb") as fh:
        return mmap.mmap(fh.fileno(), size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0), prot=mmap.PROT_READ)


@contextmanager
def _mapped(path: str, size: int) -> Iterator[Any]:
    """:func:`_map` of the first ``size`` bytes of ``path`` for the ``with`` block (``b""`` for
    ``size`` 0), closed after it. Raises ``OSError`` as :func:`_map`."""
    if not size:
        yield b""
        return
    mm = _map(path, size)
    try:
        yield mm
    finally:
        mm.close()


@dataclass
class SharedLines:
    """One work item of the parallel ingest (``jobs > 1``): part of a :class:`LineBatch` whose
    lines' bytes wait in a file (``blob``, in ``/dev/shm`` when there is one) instead of crossing
    the pipe, so that what is pickled is small. ``entries``: as :attr:`LineBatch.entries`, but a
    capture-v1 line is ``("line", line_no, offset, length)``, its ``length`` bytes the next ones
    of ``blob`` (lines back to back, in entry order). ``out``: the file :func:`ingest_shared`
    writes its tables to (Arrow IPC). ``spec``: the batch's :class:`IngestSpec`."""

    spec: IngestSpec
    source: str
    blob: str
    out: str
    entries: list[tuple] = field(default_factory=list)

    def line_batch(self) -> LineBatch:
        """The :class:`LineBatch` this item stands for (the lines read back from ``blob``).
        Raises ``OSError`` when ``blob`` cannot be read."""
        size = sum(e[3] for e in self.entries if e[0] == "line")
        entries: list[tuple] = []
        with _mapped(self.blob, size) as data:
            pos = 0
            for e in self.entries:
                if e[0] == "line":
                    n = e[3]
                    entries.append(("line", e[1], e[2], data[pos:pos + n]))
                    pos += n
                else:
                    entries.append(e)
        return LineBatch(self.source, entries)


#: The tables of an ingest result, in the order :func:`ingest_shared` writes them to its file.
_RESULT_TABLES = ("exchanges", "tools", "ingest_errors")


def ingest_shared(item: SharedLines, _pool_spec: Any = None) -> dict[str, Any]:
    """:func:`ingest_batch` of a :class:`SharedLines` item, run in a pool process: the lines are
    read from ``item.blob`` and the three tables written to ``item.out`` as three Arrow IPC
    streams back to back (nothing large is pickled back). ``_pool_spec``: the pool's own run spec
    (:func:`replay.runner.pool.map_batches` passes it; unused: ingest needs only ``item.spec``).
    Returns the result of :func:`ingest_batch` with each table replaced by ``"ipc"``: the file
    and the byte offsets ``[start, end)`` of its three streams. Raises ``OSError`` when a file
    cannot be read or written."""
    res = ingest_batch(item.line_batch(), item.spec)
    spans = []
    with pa.OSFile(item.out, "wb") as sink:
        for name in _RESULT_TABLES:
            start = sink.tell()
            with pa.ipc.new_stream(sink, res[name].schema) as w:
                w.write_batch(res.pop(name))
            spans.append((start, sink.tell()))
    res["ipc"] = (item.out, spans)
    return res


def _read_shared(res: dict[str, Any]) -> dict[str, Any]:
    """A result of :func:`ingest_shared` with its tables read back (memory-mapped, not copied:
    the batches' buffers point into the file's pages, which stay mapped while they live; the file
    is unlinked at once). Other results are returned as they are."""
    if "ipc" not in res:
        return res
    path, spans = res.pop("ipc")
    mm = _map(path, spans[-1][1])  # three IPC streams: never empty
    os.unlink(path)
    buf = pa.py_buffer(mm)  # unmapped when the last batch reading it is gone
    for name, (a, b) in zip(_RESULT_TABLES, spans):
        got = list(pa.ipc.open_stream(buf.slice(a, b - a)))
        res[name] = got[0]
    return res


def _combine(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The result of a whole :class:`LineBatch` from the results of its parts, in order (each as
    :func:`ingest_batch` returns it): rows concatenated (dictionaries unified, so ``tools_json``
    and ``tool_json`` keep one dictionary each), ``ingest_errors`` in the order one batch gives
    them (those met while parsing, then the schema rejects), counts summed."""
    if len(parts) == 1:
        return parts[0]
    met, late = [], []
    for p in parts:
        err, k = p["ingest_errors"], p.get("late_errors", 0)
        met.append(err.slice(0, err.num_rows - k))
        late.append(err.slice(err.num_rows - k))
    out: dict[str, Any] = {
        "exchanges": pa.concat_batches([p["exchanges"] for p in parts]),
        "tools": pa.concat_batches([p["tools"] for p in parts]),
        "ingest_errors": pa.concat_batches(met + late),
        "tool_counts": [c for p in parts for c in p["tool_counts"]],
        "late_errors": sum(p.get("late_errors", 0) for p in parts),
    }
    for key in ("reasons", "redactions", "filtered_by"):
        total: Counter[str] = Counter()
        for p in parts:
            total.update(p[key])
        out[key] = dict(total)
    return out


def _shm_dir(fallback: Path, need: int = 0, shm: Path = Path("/dev/shm")) -> Path:
    """Where the parallel ingest's work files go: ``shm`` (``/dev/shm``: memory, never the disk)
    when it is a writable folder with at least ``need`` bytes free, else ``fallback`` (the run
    folder). A container's /dev/shm is often 64 MiB: writing the items' lines there failed with
    ``ENOSPC`` and a traceback."""
    try:
        st = os.statvfs(shm)
    except OSError:
        return fallback
    free = st.f_bavail * st.f_frsize
    return shm if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) and free >= need else fallback


def _shm_need(jobs: int) -> int:
    """Bytes of work files a parallel ingest of ``jobs`` processes may hold at once: the items in
    flight (:data:`replay.runner.pool.IN_FLIGHT` a process) and a spare, each its lines and its tables
    back, with room to spare."""
    from replay.runner.pool import IN_FLIGHT

    return 4 * _POOL_ITEM_BYTES * (jobs * IN_FLIGHT + 1)


def _remove_stale_work_dirs(where: Path, prefix: str = "replay-ingest") -> list[Path]:
    """Remove the work folders ``<prefix>-<pid>-*`` in ``where`` whose process no longer exists
    (the parallel ingest's, ``replay-ingest``, as :func:`_on_pool` names them; the stages run
    during ingest, ``replay-stages``, :mod:`replay.runner.overlap`): a ``replay`` killed with SIGKILL
    (or the OOM killer) cannot remove its own, and in ``/dev/shm`` each held its work files in
    memory until reboot. A folder of a live process, or of a pid this user may not signal
    (another user's), is left alone. Returns the folders removed."""
    import shutil

    removed = []
    try:
        found = list(where.glob(f"{prefix}-*-*"))
    except OSError:
        return removed
    for d in found:
        pid = d.name.split("-")[2]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
        except OSError:  # alive under another user (PermissionError), or unknown: keep it
            pass
    return removed


#: The function the pool runs on each :class:`SharedLines` item (a module attribute, looked up
#: at each run: a test puts a function of its own here that kills its process on some lines).
_POOL_FUNCTION: Callable[[SharedLines, Any], dict[str, Any]] = ingest_shared


def _on_pool(batches: Iterator[LineBatch], spec: IngestSpec, write: Callable[[dict[str, Any], str], None], jobs: int, pool_spec: Any,
             out: Path, pool_stats: Any = None) -> None:
    """Run ``batches`` through :func:`ingest_batch` on a pool of ``jobs`` processes
    (:func:`replay.runner.pool.map_batches`, the pool of ``pool_spec`` when given, so that an audit's
    stages pool, already started, parses its ingest too; else one of ``spec``) and give each batch's result to
    ``write(result, source)`` in reading order, the same results as in this process.

    ``batches`` come in parts of about :data:`_POOL_ITEM_BYTES` (:func:`_batches`,
    ``part_bytes``); a part of capture-v1 lines is a :class:`SharedLines` item: its lines go to the pool through files in
    ``/dev/shm`` (:func:`_shm_dir`), and the tables come back the same way
    (:func:`ingest_shared`, :func:`_read_shared`); the parts of a batch are joined
    (:func:`_combine`) and written as that batch. This process only reads (decompresses, splits
    lines), copies lines out and writes Parquet. A batch holding readers' records (HAR, OTel,
    SSE, server logs, LiteLLM, Batch: their readers keep state across records, and the records
    are dicts already) is parsed here, in its turn, and so are the items met while the pool's
    processes are still starting (:func:`replay.runner.pool.started`: an audit's pool builds the run's
    renderers and parsers first, which would leave this process waiting). A pool process that dies is retried once
    alone, then its item's records become ``internal-error`` rows (:func:`failed_batch`);
    ``pool_stats`` (a :class:`replay.runner.pool.PoolStats`, or None) counts them."""
    import shutil
    import tempfile

    from replay.runner.pool import map_batches, started

    on = pool_spec if pool_spec is not None else spec
    shm = _shm_dir(out, _shm_need(jobs))
    _remove_stale_work_dirs(shm)
    tmp = Path(tempfile.mkdtemp(prefix=f"replay-ingest-{os.getpid()}-", dir=shm))
    ready: dict[int, tuple[list[dict[str, Any]], str]] = {}  # batch -> its parts' results, source
    parts_of: dict[int, list[Any]] = {}  # batch -> its parts' results as they land (None: not yet)
    closed: set[int] = set()  # batches whose last part was read
    source_of: dict[int, str] = {}
    free_blobs: list[str] = []  # blob files whose items came back
    nxt = 0

    def flush() -> None:
        nonlocal nxt
        while nxt in ready:
            parts, source = ready.pop(nxt)
            write(_combine([_read_shared(p) for p in parts]), source)
            nxt += 1

    def landed(b: int, j: int | None, res: dict[str, Any] | None) -> None:
        """Part ``j`` of batch ``b`` is in (None: nothing new, the batch's last part was empty)."""
        parts = parts_of[b]
        if j is not None:
            parts[j] = res
        if b in closed and all(p is not None for p in parts):
            closed.discard(b)
            ready[b] = (parts_of.pop(b), source_of.pop(b))
            flush()

    def items() -> Iterator[tuple[tuple[int, int], SharedLines]]:
        warm = False  # True once a pool process has started
        b = 0  # the batch the next part belongs to
        for part in batches:  # parts of about _POOL_ITEM_BYTES (_batches), each batch's last one marked
            parts = parts_of.setdefault(b, [])
            source_of[b] = part.source
            j = len(parts) if part.entries else None
            if j is not None:
                parts.append(None)
            if part.last:
                closed.add(b)
            if j is None:
                landed(b, None, None)
            elif any(e[0] == "record" for e in part.entries):  # other formats: parsed here
                landed(b, j, ingest_batch(part, spec))
            elif not warm and not started(on, jobs):  # the pool's processes are still starting: parse it here
                landed(b, j, ingest_batch(part, spec))
            else:
                warm = True
                # a blob file whose item came back is written over (its pages kept: tmpfs pages
                # are not allocated and zeroed again); the item's lengths say how much is its own
                blob = free_blobs.pop() if free_blobs else str(tmp / f"{b}-{j}.lines")
                item = SharedLines(spec, part.source, blob, str(tmp / f"{b}-{j}.arrow"))
                with open(blob, "r+b" if os.path.exists(blob) else "wb") as fh:
                    for e in part.entries:
                        if e[0] == "line":
                            fh.write(e[3])
                            item.entries.append(("line", e[1], e[2], len(e[3])))
                        else:
                            item.entries.append(e)
                part.entries = []  # its lines are in the file now
                yield (b, j), item
            if part.last:
                b += 1

    def failed(_key: Any, item: SharedLines, message: str) -> dict[str, Any]:
        return failed_batch(item.line_batch(), message)

    try:
        for (b, j), item, res in map_batches(_POOL_FUNCTION, items(), on, jobs, failed, pool_stats):
            free_blobs.append(item.blob)
            landed(b, j, res)
        flush()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class PoolIngest:
    """The ``executor`` of :func:`replay.capture.ingest.ingest` that parses its batches on a pool
    of ``jobs`` processes (:func:`_on_pool`): the pool of ``pool_spec`` when given (an audit's
    stages' pool, already started: :func:`replay.runner.pool.prestart`), else one of its own
    (:func:`replay.runner.pool.close_pools` ends it). ``pool_stats``: a
    :class:`replay.runner.pool.PoolStats` the pool's restarts and failed items are counted in
    (``run.json`` ``executors.ingest``). Raises ValueError for ``jobs`` below 2."""

    def __init__(self, jobs: int, pool_spec: Any = None, pool_stats: Any = None) -> None:
        if jobs < 2:
            raise ValueError(f"a pool ingest needs jobs >= 2, got {jobs}")
        self.jobs = jobs
        self.pool_spec = pool_spec
        self.pool_stats = pool_stats

    @property
    def part_bytes(self) -> int:
        """Bytes of lines per work item (:data:`_POOL_ITEM_BYTES`, read at each run)."""
        return _POOL_ITEM_BYTES

    def run(self, batches: Iterator[LineBatch], spec: IngestSpec, write: Callable[[dict[str, Any], str], None], out: Path) -> None:
        """Parse ``batches`` on the pool and ``write(result, source)`` each in reading order (:func:`_on_pool`)."""
        _on_pool(batches, spec, write, self.jobs, self.pool_spec, Path(out), self.pool_stats)


def ingest(paths: Any, out_dir: Any, *, jobs: int = 1, pool_spec: Any = None, pool_stats: Any = None, **options: Any) -> IngestStats:
    """:func:`replay.capture.ingest.ingest` of ``paths`` into ``out_dir`` (``options``: its other
    keyword arguments), its batches of capture-v1 lines parsed on a pool of ``jobs`` processes
    when ``jobs`` is above 1 (:class:`PoolIngest`; ``pool_spec``, ``pool_stats`` as there), in
    this process otherwise. The rows, their order, the row groups and the counts do not depend on
    ``jobs`` (a pool process that dies twice on an item turns its records into
    ``internal-error`` rows). Returns :class:`replay.capture.ingest.IngestStats`; raises
    ValueError for ``jobs`` below 1, and what that function raises."""
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    executor = PoolIngest(jobs, pool_spec, pool_stats) if jobs > 1 else None
    return _capture_ingest(paths, out_dir, executor=executor, **options)
