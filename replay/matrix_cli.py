"""The ``replay matrix`` command: a thin layer over :func:`replay.matrix.run_matrix`.

:func:`register` adds it to the CLI module it is given (:mod:`replay.cli` calls it with itself
at its end, so this module never imports the CLI: no import cycle); the command uses that
module's option types and output helpers (the same ``--chunkings``, ``--replay-timeout``,
``--jobs`` ... as ``replay audit``).
"""


from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from replay.errors import UsageError

__all__ = ["register"]


def register(_cli: Any) -> None:
    """Add ``replay matrix`` to ``_cli.app`` (``_cli``: the :mod:`replay.cli` module, whose
    option types, ``console``, ``_fail``, ``_captures`` and ``_progress`` it uses). Returns None."""
    _cli.app.command(cls=_cli._GroupedHelp, short_help="N sides in one audit: check by side, where each fault appears and goes away.")(
        _command(_cli))


def _command(_cli: Any) -> Any:
    """The command function, its options typed by ``_cli``'s option types."""

    def matrix(
        paths: Annotated[list[str], typer.Argument(help="Capture files or folders, as for replay audit.")],
        sides: Annotated[Path, typer.Option("--sides", metavar="FILE", rich_help_panel=_cli.SIDES,
                                            help="TOML file of [sides.NAME] tables, one per side, in release order; a table named reference "
                                                 "(or top-level reference = \"NAME\") is the reference.")],
        out: Annotated[Optional[Path], typer.Option("--out", rich_help_panel=_cli.OUTPUT, help="Run folder to write (default runs/matrix-<time>).")] = None,
        baseline: Annotated[Optional[str], typer.Option("--baseline", metavar="NAME", rich_help_panel=_cli.SIDES,
                                                        help="The side the others are compared with (fixed, broke); default the first.")] = None,
        chat_template: _cli.TemplateOpt = None,
        renderer: Annotated[Optional[str], typer.Option(
            "--renderer", metavar="SPEC", rich_help_panel=_cli.SIDES,
            help="Renderer of every side that names none: json-tools (default), harmony, mistral-common[:V], file.py:function, "
                 "or a server's tokenize endpoint http://HOST:PORT.")] = None,
        parser: _cli.ParserOpt = None,
        chunkings: _cli.ChunkingsOpt = None,
        replay_timeout: _cli.TimeoutOpt = 10.0,
        capture_format: _cli.CaptureFormatOpt = None,
        max_line_bytes: _cli.MaxLineOpt = 32 << 20,
        exemplar_text: _cli.ExemplarTextOpt = False,
        jobs: Annotated[int, typer.Option("--jobs", min=1, rich_help_panel=_cli.SCALE, help="Processes of the render and re-stream stages.")] = 1,
        force: Annotated[bool, typer.Option("--force", rich_help_panel=_cli.OUTPUT, help="Replace the run --out holds.")] = False,
        quiet: _cli.QuietOpt = False,
    ) -> None:
        """One ingest, any number of named sides rendered and re-streamed once each, all judged against
        the one reference: the exchanges each side gets wrong per check, what each fixed and broke
        against the baseline, and where each fault first appears and goes away (terminal, report.md,
        report.html).

        Example: replay matrix captures/ --sides releases.toml --out runs/matrix
        """
        import time

        import duckdb

        from replay.audit import RunExistsError
        from replay.sql import is_interrupt
        from replay.matrix import matrix_sides, run_matrix
        from replay.report.markdown import rich_table
        from replay.report.matrix import LEGEND, FAULTS_SHOWN, headline

        try:
            chosen = matrix_sides(sides, baseline)
        except UsageError as exc:  # SideError, MatrixError: the sides file or --baseline
            _cli._fail(str(exc), 2)
        files = _cli._captures(paths)
        run_dir = out or Path("runs") / time.strftime("matrix-%Y%m%d-%H%M%S")
        try:
            with _cli._progress(quiet) as stage:
                result = run_matrix(files, run_dir, chosen, chunkings=chunkings, replay_timeout=replay_timeout, chat_template=chat_template,
                                    renderer=renderer, parser=parser, jobs=jobs, capture_format=capture_format, max_line_bytes=max_line_bytes,
                                    force=force, redact=not exemplar_text, stage=stage)
        except (RunExistsError, UsageError) as exc:
            _cli._fail(str(exc), 2)
        except (KeyboardInterrupt, RuntimeError, duckdb.Error) as exc:  # a Ctrl-C, also inside a DuckDB query of the report stage

            if not is_interrupt(exc):
                raise
            _cli._fail(f"interrupted: {run_dir} is incomplete (run.json says so); run the matrix again with --force", 130)
        except (OSError, ValueError) as exc:
            _cli._fail(str(exc))
        names, base = chosen.names, chosen.baseline
        _cli.console.print(rich_table(result.report.wide, title=f"check by side (exchanges wrong; baseline {base})"))
        _cli.console.print(_cli.plain(LEGEND.format(baseline=base)), soft_wrap=True)
        _cli.console.print(_cli.plain(headline(names, base, result.matrix)), soft_wrap=True)
        if result.report.ingest:  # every line accounted for, as the audit prints it
            _cli.console.print(_cli.plain(result.report.ingest), soft_wrap=True)
        for line in result.report.render_failures:  # why a side has render failures, or no judged render check
            _cli.console.print(_cli.plain(line), soft_wrap=True)
        faults = result.report.faults
        if faults.num_rows:
            title = "where each fault appears and goes away" + (f" (the first {FAULTS_SHOWN} of {faults.num_rows:,})" if faults.num_rows > FAULTS_SHOWN else "")
            _cli.console.print(rich_table(faults.slice(0, FAULTS_SHOWN), title=title))
        wrote = f"{result.report.path}" + (f" and {result.report.html_path}" if result.report.html_path else "")
        _cli.console.print(_cli.plain(f"\nWrote {wrote} and the tables in {run_dir}/."))

    return matrix
