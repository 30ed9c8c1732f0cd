"""``replay matrix``: a thin layer over :func:`replay.matrix.run_matrix` (N sides in one audit).

It takes the same capture, chunking, timeout and scale options as ``replay audit``
(:mod:`replay.cli.options`), and sides from a sides file (:func:`replay.side.load_sides_file`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from replay.cli.app import _GroupedHelp, app, console
from replay.cli.common import _captures, _fail, _progress
from replay.cli.options import (OUTPUT, SCALE, SIDES, CaptureFormatOpt, ChunkingsOpt, ExemplarTextOpt, MaxLineOpt, ParserOpt, QuietOpt,
                                TemplateOpt, TimeoutOpt)
from replay.errors import UsageError
from replay.term import plain


@app.command(cls=_GroupedHelp, short_help="N sides in one audit: check by side, where each fault appears and goes away.")
def matrix(
    paths: Annotated[list[str], typer.Argument(help="Capture files or folders, as for replay audit.")],
    sides: Annotated[Path, typer.Option("--sides", metavar="FILE", rich_help_panel=SIDES,
                                        help="TOML file of [sides.NAME] tables, one per side, in release order; a table named reference "
                                             "(or top-level reference = \"NAME\") is the reference.")],
    out: Annotated[Optional[Path], typer.Option("--out", rich_help_panel=OUTPUT, help="Run folder to write (default runs/matrix-<time>).")] = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", metavar="NAME", rich_help_panel=SIDES,
                                                    help="The side the others are compared with (fixed, broke); default the first.")] = None,
    chat_template: TemplateOpt = None,
    renderer: Annotated[Optional[str], typer.Option(
        "--renderer", metavar="SPEC", rich_help_panel=SIDES,
        help="Renderer of every side that names none: json-tools (default), harmony, mistral-common[:V], file.py:function, "
             "sglang:DIR, vllm:DIR (a release's own), http://HOST:PORT (a tokenize endpoint).")] = None,
    parser: ParserOpt = None,
    chunkings: ChunkingsOpt = None,
    replay_timeout: TimeoutOpt = 10.0,
    capture_format: CaptureFormatOpt = None,
    max_line_bytes: MaxLineOpt = 32 << 20,
    exemplar_text: ExemplarTextOpt = False,
    jobs: Annotated[int, typer.Option("--jobs", min=1, rich_help_panel=SCALE, help="Processes of the render and re-stream stages.")] = 1,
    force: Annotated[bool, typer.Option("--force", rich_help_panel=OUTPUT, help="Replace the run --out holds.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """One ingest, any number of named sides rendered and re-streamed once each, all judged against
    the one reference: the exchanges each side gets wrong per check, what each fixed and broke
    against the baseline, and where each fault first appears and goes away (terminal, report.md,
    report.html).

    Example: replay matrix captures/ --sides releases.toml --out runs/matrix
    """
    import time

    import duckdb

    from replay.runner.runfolder import RunExistsError
    from replay.sql import is_interrupt
    from replay.matrix import matrix_sides, run_matrix
    from replay.report.markdown import rich_table
    from replay.report.matrix import LEGEND, FAULTS_SHOWN, headline

    try:
        chosen = matrix_sides(sides, baseline)
    except UsageError as exc:  # SideError, MatrixError: the sides file or --baseline
        _fail(str(exc), 2)
    files = _captures(paths)
    run_dir = out or Path("runs") / time.strftime("matrix-%Y%m%d-%H%M%S")
    try:
        with _progress(quiet) as stage:
            result = run_matrix(files, run_dir, chosen, chunkings=chunkings, replay_timeout=replay_timeout, chat_template=chat_template,
                                renderer=renderer, parser=parser, jobs=jobs, capture_format=capture_format, max_line_bytes=max_line_bytes,
                                force=force, redact=not exemplar_text, stage=stage)
    except (RunExistsError, UsageError) as exc:
        _fail(str(exc), 2)
    except (KeyboardInterrupt, RuntimeError, duckdb.Error) as exc:  # a Ctrl-C, also inside a DuckDB query of the report stage
        if not is_interrupt(exc):
            raise
        _fail(f"interrupted: {run_dir} is incomplete (run.json says so); run the matrix again with --force", 130)
    except (OSError, ValueError) as exc:
        _fail(str(exc))
    names, base = chosen.names, chosen.baseline
    console.print(rich_table(result.report.wide, title=f"check by side (exchanges wrong; baseline {base})"))
    console.print(plain(LEGEND.format(baseline=base)), soft_wrap=True)
    console.print(plain(headline(names, base, result.matrix)), soft_wrap=True)
    if result.report.ingest:  # every line accounted for, as the audit prints it
        console.print(plain(result.report.ingest), soft_wrap=True)
    for line in result.report.render_failures:  # why a side has render failures, or no judged render check
        console.print(plain(line), soft_wrap=True)
    faults = result.report.faults
    if faults.num_rows:
        title = "where each fault appears and goes away" + (f" (the first {FAULTS_SHOWN} of {faults.num_rows:,})" if faults.num_rows > FAULTS_SHOWN else "")
        console.print(rich_table(faults.slice(0, FAULTS_SHOWN), title=title))
    wrote = f"{result.report.path}" + (f" and {result.report.html_path}" if result.report.html_path else "")
    console.print(plain(f"\nWrote {wrote} and the tables in {run_dir}/."))

