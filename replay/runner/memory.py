"""Giving freed memory back to the OS between stages and batches (the audit's peak RSS counts
the parent and every pool process)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

_LIBC: Any = None  # ctypes handle of glibc once looked up; False where malloc_trim is missing


def release_memory() -> None:
    """Give memory freed by a finished stage or batch back to the OS: Arrow's allocator
    (``pa.default_memory_pool().release_unused()``: mimalloc/jemalloc keep freed pages) and, on
    glibc, ``malloc_trim(0)`` (the heap of Python's large strings and of decompression buffers).
    Cheap next to a batch; never raises."""
    try:
        pa.default_memory_pool().release_unused()
    except Exception:  # noqa: BLE001 - an allocator without it
        pass
    libc = _libc()
    if libc:
        libc.malloc_trim(0)


def release_above(limit: int) -> bool:
    """:func:`release_memory` when this process's RSS is above ``limit`` bytes (below it the freed
    pages are what the next batch reuses: trimming after every batch made each batch fault them
    in again). Returns True when it released. Never raises."""
    if rss_bytes() > limit:
        release_memory()
        return True
    return False


def _libc() -> Any:
    """glibc's ctypes handle, or False where there is none (looked up once)."""
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes

            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim  # noqa: B018 - glibc only
        except (OSError, AttributeError):
            _LIBC = False
    return _LIBC


#: ``mallopt`` parameter number of glibc's mmap threshold (malloc.h ``M_MMAP_THRESHOLD``).
_M_MMAP_THRESHOLD = -3
#: Bytes from which a malloc'd block gets its own mapping in a process that
#: :func:`glibc_allocators` set up: glibc's initial threshold, kept fixed.
MMAP_THRESHOLD = 128 << 10


def glibc_allocators() -> None:
    """Allocators for a ``--jobs`` pool process (:func:`replay.runner.pool._init`), whose RSS counts
    toward the audit's peak:

    - Arrow allocates through glibc (``pa.system_memory_pool()``) instead of mimalloc, which kept
      the pages of the Parquet pages and tables a batch freed until the batch ended (where
      :func:`release_memory` gave them back): the memory a batch frees is then reused by the next
      slice's Python strings and tokenizer buffers instead of each allocator keeping its own;
    - glibc's mmap threshold is fixed at :data:`MMAP_THRESHOLD` (``mallopt``): glibc raises it
      (up to 32 MiB) each time a mapped block is freed, after which every block up to that size
      (a ``tokenizer.json`` read, a slice's Arrow buffers) comes from the heap, whose free holes
      stay resident until the next trim.

    It lowers a render batch's peak RSS at the same CPU (figures: ``benchmarks/RESULTS.md``).
    Not used in the audit's own process, where ingest's large buffers would each be mapped and
    unmapped: more system CPU for no lower peak. Call before the process allocates much
    (Arrow buffers allocated before keep their pool); never raises."""
    try:
        pa.set_memory_pool(pa.system_memory_pool())
    except Exception:  # noqa: BLE001 - an Arrow without it
        pass
    libc = _libc()
    if libc:
        try:
            libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        except AttributeError:  # pragma: no cover - glibc has mallopt
            pass


def single_threaded_arrow() -> None:
    """Run Arrow's work in this process on its calling thread: one CPU thread and one I/O thread
    (``pa.set_cpu_count(1)``, ``pa.set_io_thread_count(1)``). For a ``--jobs`` pool process,
    which is already one of a process per core: Parquet reads and writes on Arrow's thread pools
    gained nothing there, and each thread's allocator heap kept what it freed, which
    :func:`release_memory` (run on the main thread) cannot give back. It lowers a pool process's
    RSS within and after a batch, at no more CPU (figures: ``benchmarks/RESULTS.md``). Never raises."""
    try:
        pa.set_cpu_count(1)
        pa.set_io_thread_count(1)
    except Exception:  # noqa: BLE001 - an Arrow without them
        pass


def rss_bytes() -> int:
    """This process's resident set size in bytes (``/proc/self/statm``; 0 where there is none)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


try:
    import os as _os

    _PAGE = _os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):
    _PAGE = 4096


# arrow_without_pandas is an Arrow setting the capture readers need too: it lives in replay.arrowenv
from replay.arrowenv import arrow_without_pandas  # noqa: E402,F401
