"""Arrow record batches of ingest's rows, built by pyarrow with pandas kept out of the process.

``pa.array`` of a Python list asks pyarrow's pandas shim whether the list is array-like, and the
shim imports pandas to know (start-up time and memory of a ``replay ingest`` that has no other
use for it); :func:`replay.arrowenv.arrow_without_pandas` settles the shim once, so every column here is
``pa.array`` itself, with its type checks (``TypeError``/``ArrowTypeError`` for a value of another
type, ``OverflowError`` past a column's range, ``UnicodeEncodeError`` for a lone surrogate).
The one builder of our own is :func:`text_view_column`, for the large request texts (``pa.array``
copies a batch's request JSON; the view points into it).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from replay.arrowenv import arrow_without_pandas

__all__ = ["batch_from_rows", "numpy_column", "take", "text_column", "text_view_column"]

try:  # the compute kernels without pyarrow.compute's module, which wraps ~290 functions at import
    from pyarrow._compute import call_function as _call_function
except ImportError:  # a pyarrow that moved it: the public module
    from pyarrow.compute import call_function as _call_function

_NONE = type(None)
_MAX_OFFSET = 2**31 - 1

arrow_without_pandas()


def _validity(values: list):
    """The validity bitmap of ``values`` (None = null) and the null count; (None, 0) when none is null."""
    nulls = values.count(None)
    if not nulls:
        return None, 0
    mask = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    return pa.py_buffer(np.packbits(mask, bitorder="little")), nulls


def text_column(values: list) -> pa.Array:
    """A ``string`` array of ``values`` (``str``, UTF-8 ``bytes``, or None): ``pa.array(values,
    pa.string())``. Raises as ``pa.array`` does."""
    return pa.array(values, pa.string())


def take(values: pa.Array, indices: pa.Array) -> pa.Array:
    """``values.take(indices)`` (Arrow's ``take`` kernel: the values at ``indices``, bounds checked,
    a null index giving null), called without importing :mod:`pyarrow.compute` (``Array.take``
    imports it, a tenth of ``replay ingest``'s start-up). Raises as ``Array.take``."""
    return _call_function("take", [values, indices])


def numpy_column(arr: np.ndarray) -> pa.Array:
    """A 1-D numpy array as an Arrow array of the same type, no nulls (``pa.array``'s numpy path)."""
    return pa.array(np.ascontiguousarray(arr))


def text_view_column(values: list) -> pa.Array:
    """A ``string_view`` array of ``values`` (``str``, UTF-8 ``bytes``, or None) that points into the
    ``bytes`` values themselves instead of copying them into one buffer: for a column of large
    texts (a batch's request JSON), the copy :func:`text_column` makes was a large share of
    ingest's CPU. Each ``bytes`` value becomes one of the array's data buffers (kept alive by it);
    values of at most 12 bytes are stored in their view, as the format requires. Raises as
    :func:`text_column`."""
    validity, nulls = _validity(values)
    n = len(values)
    kinds = set(map(type, values))
    kinds.discard(_NONE)
    if not kinds <= {str, bytes}:
        raise TypeError(f"expected text, got {sorted(t.__name__ for t in kinds - {str, bytes})[0]}")
    data = [b"" if v is None else v if type(v) is bytes else v.encode("utf-8") for v in values]
    lengths = np.fromiter(map(len, data), dtype=np.int64, count=n)
    if n and lengths.max() > _MAX_OFFSET:
        raise OverflowError("a value past 2 GiB")
    views = np.zeros((n, 4), np.int32)  # per value: length, then 12 inline bytes or (prefix, buffer index, offset)
    views[:, 0] = lengths
    raw = views.view(np.uint8).reshape(n, 16)
    long = np.flatnonzero(lengths > 12)
    if len(long) < n:  # short values inline (rare in a column of request texts)
        for i in np.flatnonzero(lengths <= 12).tolist():
            v = data[i]
            raw[i, 4:4 + len(v)] = np.frombuffer(v, np.uint8)
    buffers = [pa.py_buffer(data[i]) for i in long.tolist()]
    if buffers:  # the long values: 4-byte prefix and buffer index, written for all at once
        raw[long, 4:8] = np.frombuffer(b"".join([data[i][:4] for i in long.tolist()]), np.uint8).reshape(-1, 4)
        views[long, 2] = np.arange(len(buffers), dtype=np.int32)
    return pa.Array.from_buffers(pa.string_view(), n, [validity, pa.py_buffer(views), *buffers], nulls)


def batch_from_rows(rows: list[dict], schema: pa.Schema, columns: dict[str, pa.Array] | None = None) -> pa.RecordBatch:
    """``rows`` (dicts keyed by ``schema``'s field names; a missing key is null) as one record
    batch of ``schema``, each column ``pa.array`` of the field's values and type; ``columns``:
    arrays already built for some fields (used as they are). Raises as ``pa.array``, and
    ``ValueError`` for a null in a field that may not hold one (which Arrow does not check)."""
    built = columns or {}
    arrays = [built[f.name] if f.name in built else pa.array([r.get(f.name) for r in rows], f.type) for f in schema]
    for f, a in zip(schema, arrays):
        if not f.nullable and a.null_count:
            raise ValueError(f"column {f.name} may not be null")
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
