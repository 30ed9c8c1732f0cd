"""The commands that read a run: ``replay query``, ``replay show``, ``replay report`` (which
may finish a run stopped in its report stage), and ``replay formats``.
"""

from __future__ import annotations

import csv
import io
import orjson
import re
import sys
import typer
import typer.core

from pathlib import Path
from replay.cli.app import app, console, err, escape
from replay.cli.common import _duckdb, _fail, _finished_run, _gate, _gates, _hold_run, _report_interrupted
from replay.cli.options import DuckMemOpt, DuckTempOpt, DuckThreadsOpt, ExemplarTextOpt, FailOnOpt, RunOpt
from replay.term import visible
from typing import Annotated, Optional


@app.command(short_help="Run a shipped query (or any SQL) on a run.")
def query(
    name: Annotated[Optional[str], typer.Argument(help="A query of queries/ (omit with --sql, or with --list).")] = None,
    run: Annotated[Optional[Path], typer.Option("--run", help="Run folder.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table | json | csv | md")] = "table",
    sql: Annotated[Optional[str], typer.Option("--sql", help="Run this SQL on the run's tables (views: exchanges, tools, ingest_errors, renders, streams, calls; derived: verdict_pairs, verdicts_by_exchange, fidelity_exchanges).")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the queries with their titles.")] = False,
    duckdb_memory: DuckMemOpt = None,
    duckdb_threads: DuckThreadsOpt = None,
    duckdb_temp: DuckTempOpt = None,
) -> None:
    """Run a query of queries/ (or any SQL) on a run and print the result.

    Example: replay query summary --run runs/samples --format json
    """
    from replay.report import markdown_table, rich_table
    from replay.sql import connect, list_queries, run_query, run_sql

    if list_:
        for q in list_queries().values():
            console.print(f"[bold]{q.name}[/]  {q.title}", highlight=False)
        return
    if fmt not in ("table", "json", "csv", "md"):
        _fail(f"--format must be table, json, csv or md, not {fmt!r}", 2)
    if name is not None and sql is not None:
        _fail("give a query NAME or --sql, not both (replay query --list shows the names)", 2)
    if name is None and sql is None:
        _fail("give a query NAME or --sql (replay query --list shows the names)", 2)
    if run is None:
        _fail("--run RUN is required", 2)
    _finished_run(run)
    try:
        if name:  # a query of an audit's old/new sides finds nothing on a matrix run's named sides
            from replay.matrix_vars import matrix_run_refusal
            from replay.sql import get_query

            refusal = matrix_run_refusal(run, name, get_query(name).sql)
            if refusal:
                _fail(refusal)
        con = connect(run, _duckdb(duckdb_memory, duckdb_threads, duckdb_temp))
        table = run_query(con, name) if name else run_sql(con, sql or "")
    except (FileNotFoundError, ValueError) as exc:  # QueryError is a ValueError
        _fail(str(exc))
    if fmt == "json":
        sys.stdout.write(orjson.dumps(table.to_pylist(), option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str).decode() + "\n")
    elif fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(table.column_names)
        for row in table.to_pylist():
            w.writerow(["" if v is None else v for v in row.values()])
        # CSV is data: kept as captured into a pipe or file, made visible on a terminal
        sys.stdout.write(visible(buf.getvalue()) if sys.stdout.isatty() else buf.getvalue())
    elif fmt == "md":
        sys.stdout.write(visible(markdown_table(table)) + "\n")
    else:
        console.print(rich_table(table))


@app.command(short_help="One exchange: prompt diffs, calls per chunking, why.")
def show(
    exchange_id: Annotated[str, typer.Argument(metavar="ID", help="The exchange's id (exchanges.exchange_id).")],
    run: RunOpt,
    fmt: Annotated[str, typer.Option("--format", help="text | md (Markdown, for pasting into a pull request)")] = "text",
    mask: Annotated[bool, typer.Option("--mask", help="Mask message text as the exemplars do (names, markers and JSON structure kept).")] = False,
) -> None:
    """Show one exchange: old/new/reference prompts as unified diffs with token counts, served
    calls against the replayed calls per chunking, the smallest failing chunking's deltas with the
    delta where it went wrong marked, and why it is unreliable.

    Example: replay show agent-06 --run runs/samples --format md
    """
    from replay.show import ShowError, show_exchange

    if fmt not in ("text", "md"):
        _fail(f"Invalid value for '--format': {fmt!r}; one of: text, md", 2)
    _finished_run(run)
    try:
        shown = show_exchange(run, exchange_id, mask=mask)
    except (ShowError, FileNotFoundError, ValueError) as exc:
        _fail(str(exc))
    sys.stdout.write(visible(shown.markdown() if fmt == "md" else shown.text()))


@app.command(short_help="Rewrite a run's report.md, report.html and exemplars.")
def report(
    ctx: typer.Context,
    run: RunOpt,
    fail_on: FailOnOpt = None,
    exemplar_text: ExemplarTextOpt = False,
    duckdb_memory: DuckMemOpt = None,
    duckdb_threads: DuckThreadsOpt = None,
    duckdb_temp: DuckTempOpt = None,
) -> None:
    """Rewrite RUN/report.md (and RUN/exemplars/) from the run's tables and print it.

    Example: replay report --run runs/samples --fail-on 'dropped-call:broken>0'
    """
    from replay.audit import write_report

    gates = _gates(fail_on)
    folder = _hold_run(ctx, run, "report")
    _finished_run(run, report=True)
    try:
        meta = folder.read_meta()
        if (meta.get("options") or {}).get("matrix"):  # a replay matrix run: its own report (replay.matrix)
            from replay.matrix import rewrite_report

            md = rewrite_report(run, redact=not exemplar_text, duckdb_settings=_duckdb(duckdb_memory, duckdb_threads, duckdb_temp)).path
            sys.stdout.write(visible(md.read_text(encoding="utf-8")))
            return
        written = write_report(run, meta, redact=not exemplar_text, duckdb_settings=_duckdb(duckdb_memory, duckdb_threads, duckdb_temp))
        if meta.get("incomplete") == "report":  # the report an audit was stopped in is written now: the run is finished
            folder.finish()
    except (FileNotFoundError, ValueError) as exc:  # not a run; run.json or a table unreadable
        _fail(str(exc))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (during a DuckDB query too: replay.sql.raise_interrupt)
        _report_interrupted(run)
    sys.stdout.write(visible(written.path.read_text(encoding="utf-8")))
    from replay.verdicts import unjudged

    for line in unjudged(gates, run):
        err.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
    if unjudged(gates, run):
        raise typer.Exit(1)
    _gate(gates, written.results["verdicts"])


@app.command(short_help="List tool-parser families, markers and serializers.")
def formats() -> None:
    """List the tool-parser families (aliases, markers, the call starts that tell a completion's
    family (query family_mismatch), the end-of-turn tokens stripped from content), the
    model-name table and the tool serializers.

    Example: replay formats
    """
    from replay.parsers import MODEL_FAMILIES, PARSERS
    from replay.prepare import DEFAULT_PREPARER, PREPARERS
    from replay.term import FitTable
    from replay.tools import SERIALIZERS

    by_cls: dict[type, list[str]] = {}
    for alias, cls in PARSERS.items():
        by_cls.setdefault(cls, []).append(alias)
    rows = []
    for cls, aliases in by_cls.items():
        others = [a for a in aliases if a != cls.name]
        # markers such as [TOOL_CALLS] or [/THINK] are text: FitTable cells are never rich markup
        rows.append((cls.name, ", ".join(others), getattr(cls, "covers", ""), " ".join(cls.markers),
                     " ".join(getattr(cls, "call_starts", ())), " ".join(getattr(cls, "end_tokens", ()))))
    console.print(FitTable(("family", "aliases", "covers", "markers", "call starts", "end tokens"), rows, title="tool parsers"))
    console.print(FitTable(("model name pattern", "family"),
                           [(pattern.pattern, family or "(none built in)") for pattern, family in MODEL_FAMILIES],
                           title="served model names -> family (first match wins; --parser overrides)"))
    rows = []
    for name, fn in SERIALIZERS.items():
        first = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        rows.append((name, re.sub(r":\w+:`([^`]*)`", r"\1", first).replace("``", "`")))
    console.print(FitTable(("name", "what it reproduces"), rows, title="tool serializers"))
    rows = []
    for name, cls in PREPARERS.items():
        doc = (sys.modules[cls.__module__].__doc__ or "").strip().splitlines()[0]
        rows.append((name + (" (default)" if name == DEFAULT_PREPARER else ""), doc.replace("``", "`")))
    console.print(FitTable(("name", "what it reproduces"), rows, title="request preparers"))
