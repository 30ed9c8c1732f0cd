"""DuckDB over a run: one view per table, and the questions in ``queries/*.sql``.

Every ``.parquet`` file of a run folder becomes a view of the same name (``exchanges``,
``tools``, ``ingest_errors``, ``renders``, ``streams``, ``calls``); a table whose file is missing
(a run that stopped after ingest) becomes an empty view of its schema from :mod:`replay.tables`,
and a column of the schema that an older run's file lacks reads as null, so every query runs on
every run. A query file's first comment lines are its title and meaning.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

try:  # DuckDB 2
    from duckdb.sqltypes import VARCHAR
except ImportError:  # DuckDB 1
    from duckdb.typing import VARCHAR
import pyarrow as pa

from replay import tables


class QueryError(ValueError):
    """An unknown query name, or SQL that DuckDB rejects (the message carries DuckDB's)."""


@dataclass(frozen=True)
class Query:
    """A query of ``queries/``: ``name`` (file stem), ``title`` (first header line), ``doc``
    (the rest of the header comment) and ``sql``."""

    name: str
    title: str
    doc: str
    sql: str


def _parse(name: str, text: str) -> Query:
    header = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line[2:].strip())
    title = header[0] if header else name
    if title.lower().startswith(name.lower() + ":"):
        title = title[len(name) + 1 :].strip()
    return Query(name=name, title=title, doc="\n".join(header[1:]).strip(), sql=text)


def _query_files() -> list[Any]:
    """The ``.sql`` files of ``queries/``, sorted by name: the checkout's own folder beside the
    ``replay`` package when there is one (``python -m replay`` from a checkout), else the installed
    ``replay.queries`` package data."""
    # a checkout's own queries/ beside the package first (an editable install may map
    # replay.queries to another checkout), else the installed package data
    here = Path(__file__).resolve().parent.parent / "queries"
    folder: Any = here if (here / "summary.sql").is_file() else resources.files("replay.queries")
    return sorted((e for e in folder.iterdir() if e.name.endswith(".sql")), key=lambda p: p.name)


def list_queries() -> dict[str, Query]:
    """Every query shipped with the package, by name (the ``.sql`` file stem), sorted. Files whose
    name starts with ``_`` are view definitions (see :func:`connect`), not queries."""
    out = {}
    for entry in _query_files():
        name = entry.name[: -len(".sql")]
        if not name.startswith("_"):
            out[name] = _parse(name, entry.read_text(encoding="utf-8"))
    return out


def canonical_json(text: str | None) -> str | None:
    """``text`` as canonical JSON (keys sorted, no spaces, an integral float written as an int),
    so two argument texts that are the same JSON value compare equal in SQL; None when ``text`` is
    None or not JSON. Registered on every connection as the SQL function ``canonical_json``."""
    if text is None:
        return None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, TypeError):
        return None
    return json.dumps(_integral(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_integral(v) for v in value]
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    return value


def get_query(name: str) -> Query:
    """The query called ``name``. Raises :class:`QueryError` listing the known names."""
    queries = list_queries()
    if name not in queries:
        raise QueryError(f"no query {name!r}; known: {', '.join(queries)}")
    return queries[name]


#: DuckDB's memory cap (``REPLAY_DUCKDB_MEMORY``, DuckDB size syntax). Joins and aggregates over a
#: large run spill to ``<run>/.duckdb_tmp`` past it instead of growing with the run.
DEFAULT_MEMORY_LIMIT = "1GB"


def connect(run_dir: str | Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with a view per table of the run in ``run_dir``, the derived
    views of ``queries/_*.sql`` (``fidelity_exchanges``, ``verdict_pairs``: one per file, named
    after it without the ``_``) and the SQL function ``canonical_json`` (:func:`canonical_json`).

    Memory is capped at ``$REPLAY_DUCKDB_MEMORY`` (default :data:`DEFAULT_MEMORY_LIMIT`); past it
    DuckDB spills to ``<run>/.duckdb_tmp``. Raises FileNotFoundError when ``run_dir`` is not a run
    (it has no ``exchanges.parquet``), :class:`QueryError` naming a table file DuckDB cannot read.
    """
    run = Path(run_dir)
    if not (run / "exchanges.parquet").is_file():
        raise FileNotFoundError(f"{run} is not a run folder: no exchanges.parquet (run `replay ingest` or `replay audit` first)")
    con = duckdb.connect(
        ":memory:",
        config={
            "memory_limit": os.environ.get("REPLAY_DUCKDB_MEMORY", DEFAULT_MEMORY_LIMIT),
            "temp_directory": str(run.resolve() / ".duckdb_tmp"),
        },
    )
    for name, schema in tables.TABLES.items():
        path = run / f"{name}.parquet"
        if path.is_file():
            src = f"read_parquet('{_quote(path)}')"
            try:
                have = _columns(con, src)
            except duckdb.Error as exc:  # a truncated or foreign file
                first = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
                raise QueryError(f"{path}: not a readable Parquet table ({first}); re-run the stage that writes it") from None
            missing = [f for f in schema if f.name not in have]
            if missing:  # a run written by an older replay: its columns, then the new ones as null
                con.register(f"_{name}_schema", pa.Table.from_batches([], schema=pa.schema(missing)))
                cols = ", ".join(f'"{f.name}"' for f in missing)
                con.execute(f"CREATE VIEW {name} AS SELECT f.*, s.* FROM {src} f LEFT JOIN (SELECT {cols} FROM _{name}_schema) s ON false")
            else:
                con.execute(f"CREATE VIEW {name} AS SELECT * FROM {src}")
        else:
            con.register(name, pa.Table.from_batches([], schema=schema))  # an empty view of the schema
    con.create_function("canonical_json", canonical_json, [VARCHAR], VARCHAR, null_handling="special", side_effects=False)
    for entry in _query_files():  # queries/_NAME.sql: the view NAME, which queries build on
        if entry.name.startswith("_"):
            con.execute(f"CREATE VIEW {entry.name[1:-len('.sql')]} AS {entry.read_text(encoding='utf-8')}")
    return con


def _columns(con: duckdb.DuckDBPyConnection, src: str) -> set[str]:
    return {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()}


def _quote(path: Path) -> str:
    return str(path.resolve()).replace("'", "''")


def run_sql(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    """Run ``sql`` on the run's views; returns the result as an Arrow table.

    Raises :class:`QueryError` with DuckDB's message when the SQL fails.
    """
    try:
        rel = con.sql(sql)
        if rel is None:  # a statement without a result (CREATE, SET ...)
            return pa.table({})
        # DuckDB 2 names it to_arrow_table(); DuckDB 1 arrow()
        fetch = getattr(rel, "to_arrow_table", None) or rel.arrow
        return fetch()
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from exc


def run_query(con: duckdb.DuckDBPyConnection, name: str) -> pa.Table:
    """Run the shipped query ``name``; returns an Arrow table. Raises :class:`QueryError`."""
    return run_sql(con, get_query(name).sql)


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> Any:
    """The first column of the first row of ``sql`` (None when there is no row); the result is
    read to its end, as DuckDB 2 requires before the connection runs anything else."""
    got = con.execute(sql, params or []).fetchall()
    return got[0][0] if got else None


def materialize(con: duckdb.DuckDBPyConnection, view: str) -> None:
    """Compute the derived view ``view`` (one of ``queries/_*.sql``) once on this connection: its
    rows go into a temporary table and the view then reads that table, so the queries that build
    on it (``verdict_pairs`` is read by ``verdicts``, ``verdict_exchanges`` and
    ``smallest_failures``) stop recomputing it. For a connection whose tables do not change
    (a report); DuckDB spills the table past its memory limit like any other."""
    con.execute(f'CREATE OR REPLACE TEMP TABLE "_{view}_rows" AS SELECT * FROM {view}')
    con.execute(f'CREATE OR REPLACE VIEW {view} AS SELECT * FROM "_{view}_rows"')
