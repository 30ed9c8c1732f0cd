"""Arrow arrays from Python values, built column by column from numpy buffers.

Ingest turns its rows (dicts of Python values) into record batches of the :mod:`replay.tables`
schemas here instead of with ``pa.array`` / ``RecordBatch.from_pylist``, for two measured reasons:
``pa.array`` of a Python list first asks pandas whether the list is array-like, which imports
pandas (0.2-0.4 s of a ``replay ingest`` that has no other use for it), and it grows its buffers by
reallocation, copying a batch's request text several times. Here a string column is one
``b"".join`` and its offsets, a number or bool column one numpy array, a list column its offsets
and its flattened values (built the same way), a struct column its fields.

Types handled: ``string``, signed ``int8``-``int64``, ``bool``, ``timestamp`` (any unit, values
``datetime.datetime``), ``list<T>`` and ``struct<...>`` of those; :func:`column` raises
``NotImplementedError`` for another type. Values are checked as ``pa.array`` checks them for a
declared type: ``TypeError`` for a value of another Python type (a ``bool`` in an int column, a
number in a string column; ``bytes`` are taken as UTF-8 text in a string column, as ingest keeps
JSON text), ``OverflowError`` for an int out of the column's range or a column past 2 GiB of text,
``UnicodeEncodeError`` for a ``str`` holding a lone surrogate; ``None`` is null. A dict missing a
struct field gives null there; extra keys are ignored (as ``pa.array``).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["batch_from_rows", "column", "numpy_column", "text_column", "text_view_column"]

_NONE = type(None)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_UNIT = {"s": timedelta(seconds=1), "ms": timedelta(milliseconds=1), "us": timedelta(microseconds=1)}
_INTS = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_MAX_OFFSET = 2**31 - 1


def _check_types(values: list, allowed: tuple[type, ...], what: str) -> None:
    bad = set(map(type, values)).difference(allowed)
    if bad:
        raise TypeError(f"expected {what}, got {sorted(t.__name__ for t in bad)[0]}")


def _validity(values: list) -> tuple[Any, int]:
    """The validity bitmap of ``values`` (None = null) and the null count; (None, 0) when none is null."""
    nulls = values.count(None)
    if not nulls:
        return None, 0
    mask = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    return pa.py_buffer(np.packbits(mask, bitorder="little")), nulls


def _offsets(lengths: np.ndarray) -> Any:
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    if out[-1] > _MAX_OFFSET:
        raise OverflowError(f"{out[-1]} bytes/items in one column of one batch: more than 32-bit offsets hold")
    return pa.py_buffer(out.astype(np.int32))


def text_column(values: list) -> pa.Array:
    """A ``string`` array of ``values`` (``str``, UTF-8 ``bytes`` taken as they are, or None).

    All-``str`` ASCII columns (the usual case: ids, names, steps) are encoded in one call and their
    lengths read at C speed; otherwise each value is encoded on its own. Raises as the module
    docstring says."""
    validity, nulls = _validity(values)
    n = len(values)
    kinds = set(map(type, values))
    kinds.discard(_NONE)
    if not kinds <= {str, bytes}:
        raise TypeError(f"expected text, got {sorted(t.__name__ for t in kinds - {str, bytes})[0]}")
    items = values if not nulls else ["" if v is None else v for v in values]
    data = None
    if kinds == {str}:
        joined = "".join(items)
        data = joined.encode("utf-8")
        if len(data) == len(joined):  # ASCII: byte lengths are the character lengths
            lengths = np.fromiter(map(len, items), dtype=np.int64, count=n)
        else:
            data = None
    if data is None:
        enc = [v if type(v) is bytes else v.encode("utf-8") for v in items]
        lengths = np.fromiter(map(len, enc), dtype=np.int64, count=n)
        data = b"".join(enc)
    return pa.Array.from_buffers(pa.string(), n, [validity, _offsets(lengths), pa.py_buffer(data)], nulls)


_NP_TYPES = {np.dtype(np.int8): pa.int8(), np.dtype(np.int16): pa.int16(), np.dtype(np.int32): pa.int32(), np.dtype(np.int64): pa.int64()}


def numpy_column(arr: np.ndarray) -> pa.Array:
    """A signed-int numpy array (1-D) as an Arrow array of the same width, no nulls, sharing
    its buffer (``pa.array`` of a numpy array imports pandas too). Raises ``KeyError`` for
    another dtype."""
    arr = np.ascontiguousarray(arr)
    return pa.Array.from_buffers(_NP_TYPES[arr.dtype], len(arr), [None, pa.py_buffer(arr)])


def text_view_column(values: list) -> pa.Array:
    """A ``string_view`` array of ``values`` (``str``, UTF-8 ``bytes``, or None) that points into the
    ``bytes`` values themselves instead of copying them into one buffer: for a column of large
    texts (a batch's ~16 MiB of request JSON), the copy :func:`text_column` makes was a tenth of
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
    buffers = []
    for i, v in enumerate(data):
        if len(v) <= 12:
            raw[i, 4:4 + len(v)] = np.frombuffer(v, np.uint8)
        else:
            raw[i, 4:8] = np.frombuffer(v, np.uint8, 4)
            views[i, 2] = len(buffers)
            buffers.append(pa.py_buffer(v))
    return pa.Array.from_buffers(pa.string_view(), n, [validity, pa.py_buffer(views), *buffers], nulls)


def _ints(values: list, typ: pa.DataType) -> pa.Array:
    _check_types(values, (int, _NONE), "int")
    validity, nulls = _validity(values)
    arr = np.array([0 if v is None else v for v in values] if nulls else values, dtype=np.int64)  # OverflowError past int64
    dtype = _INTS[typ.bit_width]
    info = np.iinfo(dtype)
    if len(arr) and (arr.min() < info.min or arr.max() > info.max):
        raise OverflowError(f"value out of the range of {typ}")
    return pa.Array.from_buffers(typ, len(values), [validity, pa.py_buffer(arr.astype(dtype))], nulls)


def _bools(values: list) -> pa.Array:
    _check_types(values, (bool, _NONE), "bool")
    validity, nulls = _validity(values)
    arr = np.fromiter((v is True for v in values), dtype=bool, count=len(values))
    return pa.Array.from_buffers(pa.bool_(), len(values), [validity, pa.py_buffer(np.packbits(arr, bitorder="little"))], nulls)


def _timestamps(values: list, typ: pa.TimestampType) -> pa.Array:
    _check_types(values, (datetime, _NONE), "datetime")
    validity, nulls = _validity(values)
    unit = _UNIT.get(typ.unit)
    if unit is None:  # ns: timedelta has no nanoseconds
        ticks = [0 if v is None else ((v - _EPOCH) // timedelta(microseconds=1)) * 1000 for v in values]
    else:
        ticks = [0 if v is None else (v - _EPOCH) // unit for v in values]  # naive datetime: TypeError
    return pa.Array.from_buffers(typ, len(values), [validity, pa.py_buffer(np.array(ticks, dtype=np.int64))], nulls)


def _lists(values: list, typ: pa.ListType) -> pa.Array:
    _check_types(values, (list, tuple, _NONE), "list")
    validity, nulls = _validity(values)
    items = values if not nulls else [() if v is None else v for v in values]
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    child = column(list(chain.from_iterable(items)), typ.value_type)
    return pa.Array.from_buffers(typ, len(values), [validity, _offsets(lengths)], nulls, children=[child])


def _structs(values: list, typ: pa.StructType) -> pa.Array:
    _check_types(values, (dict, _NONE), "dict")
    validity, nulls = _validity(values)
    items = values if not nulls else [{} if v is None else v for v in values]
    children = [column([d.get(f.name) for d in items], f.type) for f in typ]
    return pa.Array.from_buffers(typ, len(values), [validity], nulls, children=children)


def column(values: list, typ: pa.DataType) -> pa.Array:
    """An Arrow array of type ``typ`` holding ``values`` (a list; None = null). Raises as the
    module docstring says."""
    if pa.types.is_string(typ):
        return text_column(values)
    if pa.types.is_signed_integer(typ):
        return _ints(values, typ)
    if pa.types.is_boolean(typ):
        return _bools(values)
    if pa.types.is_timestamp(typ):
        return _timestamps(values, typ)
    if pa.types.is_list(typ):
        return _lists(values, typ)
    if pa.types.is_struct(typ):
        return _structs(values, typ)
    raise NotImplementedError(f"no column builder for {typ}")


def batch_from_rows(rows: list[dict], schema: pa.Schema, columns: dict[str, pa.Array] | None = None) -> pa.RecordBatch:
    """``rows`` (dicts keyed by ``schema``'s field names; a missing key is null) as one record
    batch of ``schema``; ``columns``: arrays already built for some fields (used as they are).
    Raises as the module docstring says, and ``ValueError`` for a null in a field that may not
    hold one."""
    built = columns or {}
    arrays = [built[f.name] if f.name in built else column([r.get(f.name) for r in rows], f.type) for f in schema]
    for f, a in zip(schema, arrays):
        if not f.nullable and a.null_count:
            raise ValueError(f"column {f.name} may not be null")
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
