"""One process-wide Arrow setting shared by the capture readers and the runner: pyarrow's pandas
shim settled without pandas (:func:`arrow_without_pandas`). Kept out of :mod:`replay.runner.memory`
so that :mod:`replay.capture` needs nothing of the runner.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa


class _NoPandas:
    """A meta-path finder that makes ``import pandas`` fail (:func:`arrow_without_pandas`)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (replay: kept out of pyarrow's pandas shim)", name=name)
        return None


def arrow_without_pandas() -> bool:
    """Stop pyarrow from importing pandas in this process behind ``pa.array``: on its first call
    with a Python list, ``pa.array`` (so ``RecordBatch.from_pylist``, ``Table.from_pylist``) asks
    pyarrow's pandas shim whether the object is a pandas Series, and the shim imports pandas to
    know (pyarrow/array.pxi ``_is_array_like``, pandas-shim.pxi ``_have_pandas_internal``): pandas'
    memory in every process, which no stage uses. Here the shim's one import attempt is made while
    ``import pandas`` fails, so it records "no pandas" and never tries again for ``pa.array``;
    ``import pandas`` works again afterwards (a plugin may use it), and ``Table.to_pandas()``
    imports it then (that path asks the shim to raise, which retries the import).

    Returns True when the shim was settled here, False when pandas was already imported (then
    nothing changes). Never raises."""
    import sys

    if "pandas" in sys.modules:
        return False
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])
    except Exception:  # noqa: BLE001 - an Arrow without the shim: nothing to settle
        pass
    finally:
        sys.meta_path.remove(finder)
    return "pandas" not in sys.modules
