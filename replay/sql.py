"""DuckDB over a run: one view per table, and the questions in ``queries/*.sql``.

Every ``.parquet`` file of a run folder becomes a view of the same name (``exchanges``,
``tools``, ``ingest_errors``, ``renders``, ``streams``, ``calls``); a table whose file is missing
(a run that stopped after ingest) becomes an empty view of its schema from :mod:`replay.tables`,
and a column of the schema that an older run's file lacks reads as null, so every query runs on
every run. A query file's first comment lines are its title and meaning.

Every connection has a memory limit, a thread cap and a spill folder (:class:`DuckDBSettings`):
a query over a large run spills to disk rather than growing the process, and a query that still
runs out of memory fails with a message naming ``--duckdb-memory``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

import duckdb

try:  # DuckDB 2
    from duckdb.sqltypes import BOOLEAN, VARCHAR
except ImportError:  # DuckDB 1
    from duckdb.typing import BOOLEAN, VARCHAR
import pyarrow as pa

from replay import checks, tables
from replay.matrix_vars import recorded_order, set_matrix_vars


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
    return Query(name=name, title=title, doc="\n".join(header[1:]).strip(), sql=checks.expand_sql(text))


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


#: What DuckDB's Python client raises (a plain RuntimeError) when a signal arrives while a query
#: runs: its check of Python's signals runs the handler (Ctrl-C's, or SIGTERM's from
#: :func:`replay.cli._terminate_as_interrupt`), drops the KeyboardInterrupt that raised, and
#: raises this instead (DuckDB 1.x and 2.0).
QUERY_INTERRUPTED = "Query interrupted"


#: How DuckDB words a KeyboardInterrupt raised inside Python code it called back (a Python UDF such
#: as ``is_json_object``, the scan of a registered Arrow table such as ``checks``): an
#: ``InvalidInputException`` whose message ends with the exception's name.
_PYTHON_INTERRUPT = re.compile(r"(while executing the UDF|registered as '[^']*' failed): KeyboardInterrupt\b")


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is an interrupt: a KeyboardInterrupt, DuckDB's
    :class:`duckdb.InterruptException`, the RuntimeError of :data:`QUERY_INTERRUPTED`, or a DuckDB
    error carrying a KeyboardInterrupt raised in Python code the query called (:data:`_PYTHON_INTERRUPT`)."""
    return (isinstance(exc, (KeyboardInterrupt, duckdb.InterruptException))
            or (type(exc) is RuntimeError and str(exc) == QUERY_INTERRUPTED)
            or (isinstance(exc, duckdb.Error) and _PYTHON_INTERRUPT.search(str(exc)) is not None))


def raise_interrupt(exc: BaseException) -> NoReturn:
    """Raise ``exc`` again, or, when it is DuckDB's interrupt of a running query
    (:func:`is_interrupt`), the KeyboardInterrupt it replaced: a Ctrl-C or SIGTERM during a query
    then ends the command as it does anywhere else (exit 130, one line) instead of a traceback
    ending in ``RuntimeError: Query interrupted``. Call it from an ``except`` clause."""
    if isinstance(exc, KeyboardInterrupt) or not is_interrupt(exc):
        raise exc
    raise KeyboardInterrupt(QUERY_INTERRUPTED) from None


#: DuckDB's memory cap when neither ``--duckdb-memory`` nor ``$REPLAY_DUCKDB_MEMORY`` is given (DuckDB
#: size syntax). Sized so that ``replay`` as a whole (Python, Arrow, the report's results) peaks
#: under 500 MB on a 20k-exchange run; joins, sorts and aggregates spill to the temp directory past
#: it instead of failing (measured: ``benchmarks/RESULTS.md``, "Scale").
DEFAULT_MEMORY_LIMIT = "256MB"
#: DuckDB's thread cap when none is given: the CPU count, at most this. Each thread holds its own
#: buffers, so more threads need more memory under the same cap.
MAX_DEFAULT_THREADS = 4
#: Environment variables read when an option is not given.
ENV_MEMORY, ENV_THREADS, ENV_TEMP = "REPLAY_DUCKDB_MEMORY", "REPLAY_DUCKDB_THREADS", "REPLAY_DUCKDB_TEMP"


@dataclass(frozen=True)
class DuckDBSettings:
    """The limits of every DuckDB connection replay opens (:func:`connect`).

    ``memory_limit``: DuckDB size text (``"256MB"``, ``"2GB"``); ``threads``: a positive int;
    ``temp_directory``: where DuckDB spills past the limit. A None field is read from
    ``$REPLAY_DUCKDB_MEMORY`` / ``$REPLAY_DUCKDB_THREADS`` / ``$REPLAY_DUCKDB_TEMP``, then
    defaults to :data:`DEFAULT_MEMORY_LIMIT`, ``min(CPUs, MAX_DEFAULT_THREADS)`` and
    ``<run>/.duckdb_tmp`` (or a folder of the system temp dir when the run folder is not
    writable). Plain values: the settings pickle, for pool processes.
    """

    memory_limit: str | None = None
    threads: int | None = None
    temp_directory: str | None = None

    def resolved(self, run_dir: str | Path) -> dict[str, Any]:
        """DuckDB's ``config`` dict for a connection over ``run_dir``: ``memory_limit``,
        ``threads``, ``temp_directory``. Raises ValueError naming the option (and its variable)
        for a threads value that is not a positive integer."""
        memory = self.memory_limit or os.environ.get(ENV_MEMORY) or DEFAULT_MEMORY_LIMIT
        threads: Any = self.threads if self.threads is not None else os.environ.get(ENV_THREADS)
        if threads is None or threads == "":
            threads = max(1, min(os.cpu_count() or 1, MAX_DEFAULT_THREADS))
        try:
            threads = int(threads)
            if threads < 1:
                raise ValueError
        except (TypeError, ValueError):
            raise ValueError(f"--duckdb-threads / ${ENV_THREADS} {threads!r}: must be a whole number of threads, 1 or more") from None
        temp = self.temp_directory or os.environ.get(ENV_TEMP) or _default_temp(Path(run_dir))
        return {"memory_limit": str(memory), "threads": threads, "temp_directory": str(temp)}


def _default_temp(run: Path) -> str:
    """``<run>/.duckdb_tmp`` when the run folder is writable, else a folder of the system temp dir
    (DuckDB creates it when it first spills and removes it when the connection closes)."""
    if os.access(run, os.W_OK):
        return str(run.resolve() / ".duckdb_tmp")
    import tempfile

    return str(Path(tempfile.gettempdir()) / f"replay-duckdb-{os.getpid()}")


def out_of_memory_message(exc: BaseException, con: duckdb.DuckDBPyConnection | None = None) -> str:
    """The message for DuckDB's out-of-memory error ``exc``: that it hit replay's limit, the
    limit and thread count in force, the settings to raise (``--duckdb-memory`` /
    ``$REPLAY_DUCKDB_MEMORY``, ``--duckdb-threads``) and where it spills, then the first line of
    DuckDB's own message. ``con``: the connection, to read the settings in force from."""
    limit, threads, temp = "?", "?", "?"
    if con is not None:
        try:
            limit, threads, temp = con.execute(
                "SELECT current_setting('memory_limit'), current_setting('threads'), current_setting('temp_directory')"
            ).fetchall()[0]
        except duckdb.Error:
            pass
    first = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    return (
        f"DuckDB ran out of memory at replay's limit of {limit} ({threads} threads), spilling to {temp}: "
        f"raise the limit with --duckdb-memory (or ${ENV_MEMORY}), e.g. --duckdb-memory {_twice(limit)}, or use fewer threads "
        f"(--duckdb-threads / ${ENV_THREADS}). DuckDB said: {first}"
    )


def _twice(limit: str) -> str:
    """Twice DuckDB's shown limit (``"244.1 MiB"``) in MB, rounded up to 64 MB (``"512MB"``);
    ``"1GB"`` when the text is not a size."""
    m = re.fullmatch(r"([0-9.]+)\s*(KiB|MiB|GiB|TiB)", str(limit).strip())
    if not m:
        return "1GB"
    mb = float(m.group(1)) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[m.group(2)] * 2 / 1e6
    return f"{-(-int(mb) // 64) * 64}MB"


def connect(run_dir: str | Path, settings: DuckDBSettings | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with a view per table of the run in ``run_dir``, the derived
    views of ``queries/_*.sql`` (``fidelity_exchanges``, ``verdict_pairs``: one per file, named
    after it without the ``_``), the view ``checks`` (the check registry,
    :func:`replay.checks.table`; ``{{checks:KIND}}`` in a ``.sql`` file is expanded from it,
    :func:`replay.checks.expand_sql`), the SQL function ``canonical_json`` (:func:`canonical_json`)
    and ``is_json_object`` (:func:`replay.checks.json_object`: the rule of ``non-json-join``; DuckDB's
    own ``json_valid`` accepts NaN and a trailing comma and refuses a lone-surrogate escape).

    Memory, threads and the spill folder come from ``settings`` (:class:`DuckDBSettings`: the
    options, else ``$REPLAY_DUCKDB_*``, else the defaults); past the memory limit DuckDB spills
    there. Raises FileNotFoundError when ``run_dir`` is not a run (it has no
    ``exchanges.parquet``), :class:`QueryError` naming a table file DuckDB cannot read, ValueError
    naming the option for a memory limit or thread count DuckDB does not accept.
    """
    run = Path(run_dir)
    if not (run / "exchanges.parquet").is_file():
        raise FileNotFoundError(f"{run} is not a run folder: no exchanges.parquet (run `replay ingest` or `replay audit` first)")
    config = (settings or DuckDBSettings()).resolved(run)
    try:
        con = duckdb.connect(":memory:", config=config)
    except duckdb.Error as exc:  # "Memory must have a number (e.g. 1GB)"
        raise ValueError(f"--duckdb-memory / ${ENV_MEMORY} {config['memory_limit']!r}: {str(exc).splitlines()[0]}") from None
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
    _install(con)
    recorded = recorded_order(run)  # a matrix run: its sides' order and baseline (queries/matrix*.sql)
    if recorded is not None:
        set_matrix_vars(con, *recorded)
    return con


def connect_tables(given: dict[str, pa.Table]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection as :func:`connect` makes one for a run, over Arrow tables
    instead of a run's files (``replay repro`` judges its candidates' rows with it): each table of
    :data:`replay.tables.TABLES` is ``given[name]`` or an empty table of its schema, then the same
    registry, functions and derived views. Returns the connection (the caller closes it)."""
    con = duckdb.connect(":memory:")
    for name, schema in tables.TABLES.items():
        con.register(name, given[name] if name in given else pa.Table.from_batches([], schema=schema))
    _install(con)
    return con


def _install(con: duckdb.DuckDBPyConnection) -> None:
    """What every connection holds besides the tables: the view ``checks`` (the check registry:
    the queries read the check list from it), the SQL functions ``is_json_object`` and
    ``canonical_json``, and the derived views of ``queries/_*.sql``."""
    con.register("checks", checks.table())
    con.create_function("is_json_object", checks.json_object, [VARCHAR], BOOLEAN, null_handling="special", side_effects=False)
    con.create_function("canonical_json", canonical_json, [VARCHAR], VARCHAR, null_handling="special", side_effects=False)
    _create_views(con, [e for e in _query_files() if e.name.startswith("_")])


def _create_views(con: duckdb.DuckDBPyConnection, entries: list[Any]) -> None:
    """``queries/_NAME.sql`` -> the view NAME, each after the views it reads (DuckDB binds a view
    when it is created): a view whose creation fails for a missing table or view is tried again
    once another was created. Raises the last :class:`duckdb.CatalogException` when no order works
    (a view reading a table that does not exist)."""
    pending = list(entries)
    while pending:
        failed: list[Any] = []
        error: Exception | None = None
        for entry in pending:
            try:
                con.execute(f"CREATE VIEW {entry.name[1:-len('.sql')]} AS {checks.expand_sql(entry.read_text(encoding='utf-8'))}")
            except duckdb.CatalogException as exc:
                failed.append(entry)
                error = exc
        if len(failed) == len(pending):
            assert error is not None
            raise error
        pending = failed


#: Derived views computed once per connection (:func:`materialize`) before the first query that
#: reads them, directly or through another view: ``{view: names whose mention in SQL needs it}``.
#: ``verdict_pairs`` is stored first (a pipeline breaker): ``verdicts_by_exchange`` computed with
#: it inline (its joins and the per-exchange aggregate in one pipeline) ran out of memory at 80k
#: exchanges under 256 MB, where the stored table spills instead.
MATERIALIZED = {
    "verdict_pairs": ("verdict_pairs", "verdicts_by_exchange", "not_judged", "render_not_judged"),
    # the report's verdict table, smallest_failures and faults_by_family group verdict_pairs per exchange through it
    "verdicts_by_exchange": ("verdicts_by_exchange", "not_judged", "render_not_judged"),
}

#: DuckDB optimizers kept off while a derived view is materialized: its joins are written with the
#: side to build the hash table from on the right (the smaller), and DuckDB's estimates over
#: Parquet put a 400k-row input there instead; two large hash tables in one pipeline do not spill
#: together (duckdb/duckdb#6733), so ``verdict_pairs`` failed at 20k exchanges under 256 MB.
_KEEP_JOIN_ORDER = "join_order,build_side_probe_side"


def materialize(con: duckdb.DuckDBPyConnection, view: str) -> None:
    """Compute the derived view ``view`` (a key of :data:`MATERIALIZED`) once: its rows go into a
    temporary table (in DuckDB's buffer pool, under the memory limit, spilled past it) and the
    view is redefined to read it, so the queries built on it (the report's ``verdicts``,
    ``smallest_failures``, ``faults_by_family``, the view ``not_judged``) stop recomputing it. A
    second call does nothing. Raises :class:`QueryError` as :func:`run_sql` does."""
    table = f"_{view}_rows"
    if scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name = ?", [table]):
        return
    try:
        con.execute(f"SET disabled_optimizers = '{_KEEP_JOIN_ORDER}'")
        _execute(con, f"CREATE TEMP TABLE {table} AS SELECT * FROM {view}")
    finally:
        con.execute("RESET disabled_optimizers")
    _execute(con, f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM {table}")


def _query_error(exc: duckdb.Error, con: duckdb.DuckDBPyConnection) -> BaseException:
    """What a DuckDB error of a query becomes: the KeyboardInterrupt it carries
    (:func:`is_interrupt`), else a :class:`QueryError` (out of memory: :func:`out_of_memory_message`)."""
    if is_interrupt(exc):
        return KeyboardInterrupt(QUERY_INTERRUPTED)
    if isinstance(exc, duckdb.OutOfMemoryException):
        return QueryError(out_of_memory_message(exc, con))
    return QueryError(str(exc))


def _execute(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    try:
        con.execute(sql)
    except duckdb.Error as exc:
        raise _query_error(exc, con) from exc


def _materialize_for(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """:func:`materialize` each view of :data:`MATERIALIZED` that ``sql`` reads."""
    words = set(re.findall(r"\w+", sql.lower()))
    for view, names in MATERIALIZED.items():
        if words.intersection(names):
            materialize(con, view)


def _columns(con: duckdb.DuckDBPyConnection, src: str) -> set[str]:
    return {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()}


def _quote(path: Path) -> str:
    return str(path.resolve()).replace("'", "''")


def run_sql(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    """Run ``sql`` on the run's views; returns the result as an Arrow table.

    A derived view the SQL reads is computed once first (:data:`MATERIALIZED`). Raises
    :class:`QueryError` with DuckDB's message when the SQL fails; when DuckDB runs out of memory,
    the message names the setting to raise (:func:`out_of_memory_message`).
    """
    _materialize_for(con, sql)
    try:
        rel = con.sql(sql)
        if rel is None:  # a statement without a result (CREATE, SET ...)
            return pa.table({})
        # DuckDB 2 names it to_arrow_table(); DuckDB 1 arrow()
        fetch = getattr(rel, "to_arrow_table", None) or rel.arrow
        return fetch()
    except duckdb.Error as exc:
        raise _query_error(exc, con) from exc


def run_query(con: duckdb.DuckDBPyConnection, name: str) -> pa.Table:
    """Run the shipped query ``name``; returns an Arrow table. Raises :class:`QueryError`."""
    return run_sql(con, get_query(name).sql)


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> Any:
    """The first column of the first row of ``sql`` (None when there is no row); the result is
    read to its end, as DuckDB 2 requires before the connection runs anything else. Raises
    :class:`QueryError` (:func:`out_of_memory_message`) when DuckDB runs out of memory."""
    try:
        got = con.execute(sql, params or []).fetchall()
    except duckdb.OutOfMemoryException as exc:
        raise QueryError(out_of_memory_message(exc, con)) from exc
    return got[0][0] if got else None

