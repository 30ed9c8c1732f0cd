"""The DuckDB variables of the matrix queries, set from a matrix run's ``run.json``.

``queries/matrix.sql``, ``matrix_faults.sql`` and ``matrix_exemplars.sql`` read ``matrix_sides``
(the side names, in release order) and ``matrix_baseline``. ``replay matrix`` records both in
``run.json`` (``options.matrix.order`` and ``options.matrix.baseline``); :func:`set_matrix_vars`
sets them on a connection, so that ``replay query matrix --run RUN`` reads a matrix run in its
own order. A run without them (an audit) leaves the variables unset: the queries then read the
sides ``old`` and ``new``. This module imports nothing of replay (:func:`replay.sql.connect`
calls it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

__all__ = ["set_matrix_vars", "recorded_order"]


def recorded_order(run_dir: str | Path) -> tuple[list[str], str] | None:
    """``(side names in order, baseline)`` as ``RUN/run.json`` records them for a matrix run;
    None for any other run, or a run.json that is missing or not JSON (the caller reports that)."""
    try:
        meta = json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    m = ((meta or {}).get("options") or {}).get("matrix") if isinstance(meta, dict) else None
    if not isinstance(m, dict):
        return None
    order, base = m.get("order"), m.get("baseline")
    if not (isinstance(order, list) and order and all(isinstance(s, str) for s in order) and isinstance(base, str)):
        return None
    return order, base


def set_matrix_vars(con: Any, names: Sequence[str], baseline: str) -> None:
    """Set ``matrix_sides`` (``names``, in order) and ``matrix_baseline`` on DuckDB connection ``con``."""
    con.execute("SET VARIABLE matrix_sides = ?::VARCHAR[]", [list(names)])
    con.execute("SET VARIABLE matrix_baseline = ?::VARCHAR", [baseline])
