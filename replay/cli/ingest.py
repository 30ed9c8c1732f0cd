"""``replay ingest``: capture files into the run's Parquet tables (:func:`replay.runner.ingest.ingest`)."""

from __future__ import annotations

import typer
import typer.core

from pathlib import Path
from replay.cli.app import _GroupedHelp, app, console
from replay.cli.common import _captures, _changed_inputs, _duckdb, _fail, _filters, _hold_run, _nothing_ingested, _progress, _tokenizer
from replay.cli.options import CAPTURES, OUTPUT, SCALE, CaptureFormatOpt, DuckMemOpt, DuckTempOpt, DuckThreadsOpt, LimitOpt, MaxLineOpt, ModelOpt, QuietOpt, RedactOpt, RouteOpt, SampleKeyOpt, SampleOpt, SinceOpt, UntilOpt
from replay.term import plain
from typing import Annotated, Optional


IngestJobsOpt = Annotated[
    int,
    typer.Option(
        "--jobs", min=1, rich_help_panel=SCALE,
        help="Processes that parse the capture-v1 lines (other formats are parsed here; the tables do not depend on it). "
             "Default 1: a pool of its own costs more than it saves; `replay audit --parallel-ingest` parses on its stages' pool.",
    ),
]


@app.command(cls=_GroupedHelp, short_help="Ingest captures into the run's Parquet tables.")
def ingest(
    ctx: typer.Context,
    paths: Annotated[list[str], typer.Argument(help="Capture files or folders (recursive), or s3://, gs://, az:// URIs of objects or prefixes.")],
    out: Annotated[Path, typer.Option("--out", rich_help_panel=OUTPUT, help="Run folder to write exchanges/tools/ingest_errors Parquet into.")],
    jobs: IngestJobsOpt = 1,
    redact: RedactOpt = False,
    max_line_bytes: MaxLineOpt = 32 << 20,
    capture_format: CaptureFormatOpt = None,
    tokenizer: Annotated[Optional[Path], typer.Option(rich_help_panel=CAPTURES, help="tokenizer.json (or a folder) to decode server logs that hold only token ids.")] = None,
    force: Annotated[bool, typer.Option("--force", rich_help_panel=OUTPUT, help="Replace the run --out already holds (its tables, run.json, reports, exemplars).")] = False,
    model: ModelOpt = None,
    route: RouteOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    sample: SampleOpt = None,
    sample_key: SampleKeyOpt = "exchange_id",
    limit: LimitOpt = None,
    quiet: QuietOpt = False,
    duckdb_memory: DuckMemOpt = None,
    duckdb_threads: DuckThreadsOpt = None,
    duckdb_temp: DuckTempOpt = None,
) -> None:
    """Ingest capture files into exchanges.parquet, tools.parquet and ingest_errors.parquet.

    Example: replay ingest samples/ --out runs/samples
    """
    import dataclasses

    from replay.runner.ingest import ingest as run_ingest
    from replay.capture.files import file_size, input_record
    from replay.runner.runfolder import RunExistsError, RunFolder, filters_meta, versions  # not replay.audit: its stages' imports

    filters = _filters(model, route, since, until, sample, sample_key, limit)
    try:
        RunFolder(out, "replay ingest").check()
    except ValueError as exc:
        _fail(str(exc))
    folder = _hold_run(ctx, out, "ingest")  # before the run is looked at: another command may be writing it
    try:
        held = folder.refuse_existing(force, lambda: _changed_inputs(out, paths))
    except RunExistsError as exc:
        _fail(str(exc), 2)
    skipped: list[dict] = []
    files = _captures(paths, skipped)
    tok = _tokenizer(tokenizer)
    if held:
        folder.clear()
    out.mkdir(parents=True, exist_ok=True)
    folder.mark("ingest")
    with _progress(quiet) as stage:
        with stage("ingest", sum(file_size(f) or 0 for f in files)) as advance:
            try:
                stats = run_ingest(files, out, progress=advance, capture_format=capture_format, tokenizer=tok, redact=redact,
                                   max_line_bytes=max_line_bytes, filters=filters, jobs=jobs)
            except OSError as exc:  # the run folder or the pool's work files cannot be written; no pool
                _fail(f"ingest into {out} stopped: {exc}")
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: it ended with no word
                _fail(f"interrupted during ingest: {out} is incomplete (run.json says so; replay query and replay report "
                      "refuse it); run the ingest again with --force", 130)
        if jobs > 1:
            from replay.runner.pool import close_pools

            close_pools()
    stats.skipped_files = [*skipped, *stats.skipped_files]
    meta = folder.meta = {"options": {"capture_format": capture_format, "redact": redact, "max_line_bytes": max_line_bytes, "jobs": jobs},
                          "versions": versions(), "inputs": [input_record(f) for f in files], "ingest": dataclasses.asdict(stats)}
    if filters.active:
        meta["filters"] = filters_meta(filters, stats)
    folder.finish()
    console.print(plain(str(stats)))
    if filters.active:
        console.print(plain(meta["filters"]["sentence"]))
    from replay.report import chunking_lost_line

    lost = chunking_lost_line(stats.redactions)
    if lost:
        console.print(plain(lost))
    _nothing_ingested(meta)
    if stats.errors:
        from replay.sql import connect, run_sql
        from replay.report import rich_table

        try:
            con = connect(out, _duckdb(duckdb_memory, duckdb_threads, duckdb_temp))
        except ValueError as exc:
            _fail(str(exc))
        console.print(
            rich_table(
                run_sql(con, "SELECT source_file, source_line, reason, detail FROM ingest_errors ORDER BY source_file, source_line LIMIT 20"),
                title="ingest errors (first 20; `replay query ingest_errors --run RUN` lists all)",
            )
        )
