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
    RSS after a 20k-exchange ingest: 286 -> 130 MiB. Costs a few ms; never raises."""
    global _LIBC
    try:
        pa.default_memory_pool().release_unused()
    except Exception:  # noqa: BLE001 - an allocator without it
        pass
    if _LIBC is None:
        try:
            import ctypes

            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim  # noqa: B018 - glibc only
        except (OSError, AttributeError):
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)
