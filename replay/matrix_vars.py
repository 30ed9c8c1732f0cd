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
import re
from pathlib import Path
from typing import Any, Sequence

__all__ = ["set_matrix_vars", "recorded_order", "reads_audit_roles", "matrix_run_refusal", "matrix_rewrite_refusal"]


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


#: What marks a query as reading an audit's roles: a filter on the side ``old`` or ``new``, or one
#: of the views built from the old/new pair (queries/_verdict_pairs.sql and what reads it).
_AUDIT_ROLES = re.compile(
    r"\bside\s*(?:=|IN)\s*\(?\s*'(?:old|new)'|'old'\s*,\s*'new'|\b(?:verdict_pairs|verdicts_by_exchange|fidelity_exchanges|old_wrong|new_wrong)\b",
    re.IGNORECASE,
)


def reads_audit_roles(sql: str) -> bool:
    """Whether the query text ``sql`` reads the sides ``old``/``new`` by name (or the verdict views
    built from them), its ``--`` comments left out. Returns a bool. Such a query finds no rows of
    a matrix run's named sides: its counts there would be empty or all not-judged."""
    code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
    return bool(_AUDIT_ROLES.search(code))


def matrix_run_refusal(run_dir: str | Path, name: str, sql: str) -> str | None:
    """The one-line error for the shipped query ``name`` (text ``sql``) run on ``run_dir`` when
    that is a ``replay matrix`` run and the query reads an audit's old and new sides
    (:func:`reads_audit_roles`; the ``matrix*`` queries read the run's own order and are let
    through); None otherwise. Returns the message or None; raises nothing."""
    recorded = recorded_order(run_dir)
    if recorded is None or name.startswith("matrix") or not reads_audit_roles(sql):
        return None
    return (f"{run_dir} is a replay matrix run (sides {', '.join(recorded[0])}): query {name} reads an audit's old and new sides, "
            "which it has not; use replay query matrix, matrix_faults or matrix_exemplars, or --sql on its tables (side = the side's name)")


def matrix_rewrite_refusal(run_dir: str | Path, command: str) -> str | None:
    """The one-line error for ``replay COMMAND --run RUN_DIR`` (``render``, ``stream``: a command
    that rewrites an audit's old/new/reference rows in place) when ``run_dir`` is a ``replay
    matrix`` run: it would replace the rows of the matrix's named sides with old and new ones,
    and its report with an audit's. None for any other run. Returns the message or None."""
    recorded = recorded_order(run_dir)
    if recorded is None:
        return None
    return (f"{run_dir} is a replay matrix run (sides {', '.join(recorded[0])}): replay {command} writes an audit's old and new "
            "sides and would replace its sides' rows; run replay matrix again with --force (other sides, other options), "
            "or audit into another --out")
