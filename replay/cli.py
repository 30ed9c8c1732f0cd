"""The ``replay`` command line: options in, one library call, output out.

Every command is a thin layer over the library (:mod:`replay.audit`, :mod:`replay.capture`,
:mod:`replay.pipeline`, :mod:`replay.sql`, :mod:`replay.report`). Exit codes: 0 done, 1 a query
error or a spec that does not load (a plugin, an interpreter, a template), or a run folder another
command is writing (:class:`replay.runmeta.RunLock`), 2 bad usage, before any
work and in one line naming the option and what it accepts (a value not of the option's form:
``--replay-timeout abc``, ``--chunkings ""``, ``--capture-format xml``, ``--date 2026-13-45``, a
bad ``--fail-on``; an existing run in ``--out`` without ``--force``), 3 a ``--fail-on`` condition
held (:data:`replay.verdicts.FAIL_ON_EXIT`). Help is click's plain layout, wrapped at the
terminal's width (rich's panels cut long words with "…" at 80 columns). 130: interrupted (Ctrl-C,
SIGTERM), in one line naming the stage.
"""

from __future__ import annotations

from replay.errors import UnknownNameError, UsageError  # noqa: F401

import csv
import io
import re
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Optional

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import orjson  # noqa: E402
import typer  # noqa: E402
import typer.core  # noqa: E402
from rich.console import Console, ConsoleDimensions  # noqa: E402
from rich.markup import escape as _markup_escape  # noqa: E402

from replay import __version__  # noqa: E402
from replay.term import plain, visible  # noqa: E402


def escape(text: str) -> str:
    """``text`` for a rich markup string: control characters made visible
    (:func:`replay.term.visible`: a capture's escape codes never reach the terminal) and square
    brackets escaped (``[bold]`` in a model name or path prints as it is)."""
    return _markup_escape(visible(text))


def _interrupted(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _terminate_as_interrupt() -> None:
    """Make SIGTERM (``kill PID``, a CI runner's or container's stop) end the command as Ctrl-C
    does: ``KeyboardInterrupt`` in the main thread, so that every ``finally`` runs (the pool's
    processes stopped, ingest's ``/dev/shm`` files and the run's temporary tables removed, run.json
    left saying which stage is incomplete). With the default action the process died at once and
    left its pool processes running and its work files behind. Only where SIGTERM still has its
    default action, and only in the main thread (``signal.signal`` raises ``ValueError`` elsewhere)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupted)


class _OneLineErrors(typer.core.TyperGroup):
    """The command group: a usage error (a bad option value, a missing argument) is one line on
    stderr, ``error: Invalid value for '--replay-timeout': 'abc' is not a valid float.``, with
    exit code 2, before any work; click's own display adds the usage and a hint on three more."""

    # click's exception classes, whether typer vendors click (0.2x) or uses the package
    _usage = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
    _click_exc = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None, standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        _terminate_as_interrupt()
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except self._usage as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # `replay` alone: the help, as click shows it
                sys.stdout.write(exc.format_message() + "\n")
                sys.exit(exc.exit_code)
            cmd = f"{exc.ctx.command_path} --help" if exc.ctx is not None else "replay --help"
            err.print(f"[bold red]error:[/] {escape(exc.format_message())} ({escape(cmd)})", highlight=False, soft_wrap=True)
            sys.exit(exc.exit_code)
        except self._click_exc as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except typer.Abort:
            err.print("Aborted.")
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a Ctrl-C or SIGTERM it does not handle itself (``replay query``,
        ``replay show``; DuckDB's ``RuntimeError: Query interrupted`` included) ends it with one
        line and exit 130, not typer's 130 without a word, nor a traceback."""
        try:
            return super().invoke(ctx)
        except (KeyboardInterrupt, RuntimeError) as exc:
            from replay.sql import is_interrupt

            if not is_interrupt(exc):
                raise
            name = f"replay {ctx.invoked_subcommand}" if ctx.invoked_subcommand else "replay"
            err.print(f"[bold red]error:[/] interrupted: {escape(name)} stopped", highlight=False, soft_wrap=True)
            raise typer.Exit(130) from None


class _GroupedHelp(typer.core.TyperCommand):
    """A command whose ``--help`` lists its options in one section per group (the option's
    ``rich_help_panel``: :data:`HELP_GROUPS` in that order, ``--help`` under Output, then the rest
    under "Options"), in
    click's plain layout wrapped at the terminal's width. typer groups options only in rich
    markup mode, whose panels cut long words with "…" at 80 columns (``rich_markup_mode=None``)."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        groups: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:  # hidden: the deprecated per-side flags
                continue
            if param.param_type_name == "argument":
                group = "Arguments"
            elif param.name == "help":
                group = "Output"
            else:
                group = getattr(param, "rich_help_panel", None) or "Options"
            groups.setdefault(group, []).append(record)
        for group in ("Arguments", *HELP_GROUPS, "Options"):
            if groups.get(group):
                with formatter.section(group):
                    formatter.write_dl(groups[group])


#: The sections of a command's ``--help`` (:class:`_GroupedHelp`), in order.
HELP_GROUPS = ("Captures", "Sides", "Checks", "Output", "Scale")


app = typer.Typer(
    name="replay",
    cls=_OneLineErrors,
    help="Replay captured LLM serving traffic through old and new tool serializers, chat templates and "
    "tool parsers, and count what differs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's plain help: it wraps every description at the terminal's width; rich's option panel
    # cut long words with "…" at 80 columns (the default chunkings, the --fail-on example)
    rich_markup_mode=None,
)
class _Stdout(Console):
    """stdout's console: the width is ``COLUMNS`` when set (read at each print, as rich reads it;
    a CI log or pipe whose width the user chose), else the terminal's, else (a pipe, a CI log)
    unlimited: tables and lines take the room they need there. Tables fit whatever the width
    (:class:`replay.term.FitTable`). Emoji off: ":x:" in a path or spec is text, not an emoji code."""

    def __init__(self) -> None:
        super().__init__(emoji=False)

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit() and int(columns) > 0:
            return ConsoleDimensions(int(columns), size.height)
        return size if self.is_terminal else ConsoleDimensions(100_000, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = _Stdout()
err = Console(stderr=True, emoji=False)

# --- option values, judged before any work (a bad one: typer.BadParameter, exit 2, one line) -----
def _timeout_value(text: Any) -> float:
    """``--replay-timeout``: seconds, a number >= 0 (0: no limit)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise typer.BadParameter(f"{text!r} is not a number of seconds >= 0 (0: no limit)")
    return value


def _chunkings_value(value: Optional[str]) -> Optional[str]:
    """Comma-separated chunking names (:func:`replay.stream.check_chunking`); an empty list or an
    empty name is an error (it silently meant the defaults). Returns the value as given."""
    if value is None:
        return None
    from replay.stream import ChunkingError, parse_chunkings

    try:
        parse_chunkings(value)
    except ChunkingError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


def _format_value(value: Optional[str]) -> Optional[str]:
    from replay.capture.detect import FORMATS

    if value is not None and value not in FORMATS:
        raise typer.BadParameter(f"unknown format {value!r}; one of: {', '.join(FORMATS)}")
    return value


def _date_value(value: Optional[str]) -> Optional[str]:
    from replay.render.specs import parse_date

    if value is not None:
        try:
            parse_date(value)
        except ValueError as exc:  # "'2026-13-45': not a calendar date (month must be in 1..12)"
            raise typer.BadParameter(str(exc).removeprefix("--date ")) from None
    return value


def _ts_value(value: Optional[str]) -> Optional[str]:
    """``--since`` / ``--until``: ISO 8601 or epoch seconds (:func:`replay.capture.timestamps.parse_ts`)."""
    if value is not None:
        from replay.capture.timestamps import TimestampError, parse_ts

        try:
            parse_ts(value)
        except TimestampError:
            raise typer.BadParameter(f"{value!r} is not a time: ISO 8601 (2026-01-31, 2026-01-31T12:00:00Z) or epoch seconds") from None
    return value


def _fraction_value(value: Optional[str]) -> Optional[str]:
    if value is not None:
        from replay.capture.filters import parse_fraction

        try:
            parse_fraction(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return value


def _sample_key_value(value: str) -> str:
    """``--sample-key``: a column of ``exchanges`` or ``request.<dotted path>``."""
    from replay.tables import EXCHANGES

    if value.startswith("request.") and all(value[len("request.") :].split(".")):
        return value
    if value in EXCHANGES.names:
        return value
    raise typer.BadParameter(f"{value!r} is neither request.PATH (e.g. request.metadata.session_id) nor a column of exchanges (exchange_id, model, route, ...)")


def _models_value(value: Optional[list[str]]) -> Optional[list[str]]:
    """``--model``: shell globs; an empty one matches no model name, so it would keep nothing."""
    for glob in value or []:
        if not glob.strip():
            raise typer.BadParameter(f"{glob!r}: an empty pattern matches no model (give a glob such as 'Qwen/*')")
    return value


def _routes_value(value: Optional[list[str]]) -> Optional[list[str]]:
    from replay.capture.v1 import ROUTES

    for route in value or []:
        if route not in ROUTES:
            raise typer.BadParameter(f"unknown route {route!r}; one of: {', '.join(ROUTES)}")
    return value


# --- shared options -------------------------------------------------------------------------------
# ``rich_help_panel`` names the section of ``--help`` an option is listed in (:class:`_GroupedHelp`).
CAPTURES, SIDES, CHECKS, OUTPUT, SCALE = "Captures", "Sides", "Checks", "Output", "Scale"
RunOpt = Annotated[Path, typer.Option("--run", rich_help_panel=OUTPUT, help="Run folder (made by `replay audit` or `replay ingest`).")]
SideHelp = {
    "old": "The old side: comma-separated KEY=VALUE (repeatable), or a TOML inline table for a value with a comma. Keys: preparer, "
           "serializer (default model-dump), chat_template, renderer, parser, python, pythonpath, render_in.",
    "new": "The new side, as --old (serializer default: client-fields).",
    "reference": "The side judged against (serializer default: as-sent), as --old without python, pythonpath, render_in: "
                 "its parser (e.g. sglang/NAME, vllm/NAME, trtllm/NAME) must be importable by the interpreter running replay.",
}
OldSide = Annotated[Optional[list[str]], typer.Option("--old", metavar="KEY=VALUE", rich_help_panel=SIDES, help=SideHelp["old"])]
NewSide = Annotated[Optional[list[str]], typer.Option("--new", metavar="KEY=VALUE", rich_help_panel=SIDES, help=SideHelp["new"])]
RefSide = Annotated[Optional[list[str]], typer.Option("--reference", metavar="KEY=VALUE", rich_help_panel=SIDES, help=SideHelp["reference"])]
SidesFileOpt = Annotated[
    Optional[Path],
    typer.Option("--sides", metavar="FILE", rich_help_panel=SIDES,
                 help="TOML file of [sides.NAME] tables of those keys: old, new, reference."),
]
TemplateOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--chat-template",
        metavar="FILE",
        rich_help_panel=SIDES,
        help="Chat template of every side (.jinja or tokenizer_config.json). Repeatable as PATTERN=FILE: the model name picks it.",
    ),
]
TokenizerOpt = Annotated[Optional[Path], typer.Option(rich_help_panel=SIDES, help="tokenizer.json (or a folder holding one) for token counts and the `token` chunking.")]
RenderTokenizerOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--tokenizer",
        metavar="FILE",
        rich_help_panel=SIDES,
        help="tokenizer.json (or its folder): token counts, the token chunking. Repeatable as PATTERN=FILE.",
    ),
]
RendererOpt = Annotated[
    Optional[str],
    typer.Option("--renderer", metavar="SPEC", rich_help_panel=SIDES,
                 help="Renderer of old and new: json-tools (default), harmony, mistral-common[:V], file.py:function, or a server's tokenize endpoint http://HOST:PORT."),
]
DateOpt = Annotated[
    Optional[str],
    typer.Option("--date", metavar="YYYY-MM-DD", callback=_date_value, rich_help_panel=SIDES, help="The day templates read (default 2026-01-01)."),
]
ParserOpt = Annotated[Optional[str], typer.Option("--parser", metavar="FAMILY", rich_help_panel=SIDES, help="Parser family of every exchange (default: by model).")]


def _hidden(flag: str, key: str, kind: Any = str) -> Any:
    """A deprecated per-side flag (``--old-parser``): hidden from ``--help``, folded into the side's
    value as ``key`` (:func:`_resolve_sides`, which prints the deprecation line)."""
    side = flag.split("-")[2]
    return Annotated[Optional[kind], typer.Option(flag, hidden=True, help=f"Deprecated: --{side} {key}=VALUE.")]


# the deprecated per-side flags, one release: (flag, side value key)
OldSer = _hidden("--old-serializer", "serializer")
NewSer = _hidden("--new-serializer", "serializer")
RefSer = _hidden("--reference-serializer", "serializer")
OldPreparer = _hidden("--old-preparer", "preparer")
NewPreparer = _hidden("--new-preparer", "preparer")
RefPreparer = _hidden("--reference-preparer", "preparer")
OldTemplate = _hidden("--old-chat-template", "chat_template", Path)
NewTemplate = _hidden("--new-chat-template", "chat_template", Path)
RefTemplate = _hidden("--reference-chat-template", "chat_template", Path)
OldRendererOpt = _hidden("--old-renderer", "renderer")
NewRendererOpt = _hidden("--new-renderer", "renderer")
RefEncoderOpt = _hidden("--reference-encoder", "renderer")
OldParser = _hidden("--old-parser", "parser")
NewParser = _hidden("--new-parser", "parser")
RefParser = _hidden("--reference-parser", "parser")
OldPython = _hidden("--old-python", "python")
NewPython = _hidden("--new-python", "python")
OldPath = _hidden("--old-pythonpath", "pythonpath")
NewPath = _hidden("--new-pythonpath", "pythonpath")
OldRenderIn = _hidden("--old-render-in", "render_in")
NewRenderIn = _hidden("--new-render-in", "render_in")
#: parameter name of a deprecated flag -> (side, side value key)
_LEGACY: dict[str, tuple[str, str]] = {
    f"{side}_{key}": (side, key)
    for side in ("old", "new", "reference")
    for key in ("serializer", "preparer", "chat_template", "renderer", "parser", "python", "pythonpath", "render_in")
    if not (side == "reference" and key in ("renderer", "python", "pythonpath", "render_in"))
}
_LEGACY["reference_encoder"] = ("reference", "renderer")
TimeoutOpt = Annotated[
    float,
    typer.Option(parser=_timeout_value, metavar="SECONDS", rich_help_panel=CHECKS,
                 help="Limit of one parse or replay, else an error (0: none)."),
]
RedactOpt = Annotated[
    bool,
    typer.Option("--redact", rich_help_panel=CAPTURES,
                 help="Hash message text at ingest, tables too (no re-streaming then)."),
]
MaxLineOpt = Annotated[
    int, typer.Option("--max-line-bytes", min=1, metavar="BYTES", rich_help_panel=CAPTURES, help="Longest line read; a longer one is counted as an error.")
]
FailOnOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--fail-on", metavar="RULE", rich_help_panel=CHECKS,
        help="Exit 3 when the verdicts show VERDICT, CHECK:VERDICT or CHECK:VERDICT>N "
        "(e.g. broken, 'dropped-call:broken>0', 'null-leak:still-wrong>10': quote a >). Repeatable.",
    ),
]
ExemplarTextOpt = Annotated[bool, typer.Option("--exemplar-text", rich_help_panel=OUTPUT, help="Message text in exemplars as captured (default: masked).")]
CaptureFormatOpt = Annotated[
    Optional[str],
    typer.Option("--capture-format", metavar="FORMAT", callback=_format_value, rich_help_panel=CAPTURES,
                 help="Read every capture as v1, sse, body, openai-batch, har, serverlog, litellm, otel, kong, helicone, vllm-log, mitmproxy, langfuse or openai-stored (default: detected)."),
]
ModelOpt = Annotated[
    Optional[list[str]],
    typer.Option("--model", metavar="GLOB", callback=_models_value, rich_help_panel=CAPTURES, help="Keep models matching this glob ('Qwen/*'). Repeatable."),
]
RouteOpt = Annotated[
    Optional[list[str]],
    typer.Option("--route", metavar="ROUTE", callback=_routes_value, rich_help_panel=CAPTURES, help="Keep chat.completions, messages or responses. Repeatable."),
]
SinceOpt = Annotated[
    Optional[str], typer.Option("--since", metavar="TIME", callback=_ts_value, rich_help_panel=CAPTURES, help="Keep ts >= TIME (ISO 8601 or epoch seconds; UTC).")
]
UntilOpt = Annotated[Optional[str], typer.Option("--until", metavar="TIME", callback=_ts_value, rich_help_panel=CAPTURES, help="Keep ts < TIME.")]
SampleOpt = Annotated[
    Optional[str],
    typer.Option("--sample", metavar="FRACTION", callback=_fraction_value, rich_help_panel=CAPTURES, help="Keep this fraction (0.1, 10%) by a hash of --sample-key."),
]
SampleKeyOpt = Annotated[
    str,
    typer.Option("--sample-key", metavar="FIELD", callback=_sample_key_value, rich_help_panel=CAPTURES,
                 help="What --sample hashes: a column or request.PATH."),
]
LimitOpt = Annotated[Optional[int], typer.Option("--limit", min=1, metavar="N", rich_help_panel=CAPTURES, help="Keep at most N exchanges.")]
JobsOpt = Annotated[
    Optional[int],
    typer.Option("--jobs", min=1, metavar="N", rich_help_panel=SCALE, help="Processes of the render and re-stream stages (default: CPUs)."),
]
OverlapOpt = Annotated[
    bool,
    typer.Option(
        "--overlap/--no-overlap", rich_help_panel=SCALE,
        help="Render and re-stream row groups while ingest runs.",
    ),
]
ParallelIngestOpt = Annotated[
    bool,
    typer.Option(
        "--parallel-ingest/--no-parallel-ingest", rich_help_panel=SCALE,
        help="Also parse capture-v1 lines on the --jobs pool.",
    ),
]
BatchRowsOpt = Annotated[
    int, typer.Option("--batch-rows", min=1, metavar="N", rich_help_panel=SCALE, help="Exchanges per batch (the unit of work and of resuming).")
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", rich_help_panel=OUTPUT, help="No progress bar or progress lines on stderr.")
]
DuckMemOpt = Annotated[
    Optional[str],
    typer.Option("--duckdb-memory", metavar="SIZE", envvar="REPLAY_DUCKDB_MEMORY", show_envvar=True, rich_help_panel=SCALE,
                 help="DuckDB's memory limit (default 256MB)."),
]
DuckThreadsOpt = Annotated[
    Optional[int], typer.Option("--duckdb-threads", metavar="N", envvar="REPLAY_DUCKDB_THREADS", show_envvar=True, min=1, rich_help_panel=SCALE,
                                help="DuckDB's threads (default: --jobs, at most 4).")
]
DuckTempOpt = Annotated[
    Optional[Path], typer.Option("--duckdb-temp", metavar="DIR", envvar="REPLAY_DUCKDB_TEMP", show_envvar=True, rich_help_panel=SCALE,
                                 help="Where DuckDB spills (default RUN/.duckdb_tmp).")
]


def _one_of(option: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise typer.BadParameter(f"{value!r} is not one of: {', '.join(allowed)}", param_hint=f"'{option}'")
    return value


EngineOpt = Annotated[
    str,
    typer.Option("--engine", callback=lambda v: _one_of("--engine", v, ("local", "ray")), rich_help_panel=SCALE,
                 help="local, or ray (one Ray task per batch; the ray extra)."),
]
RayAddressOpt = Annotated[
    Optional[str], typer.Option("--ray-address", rich_help_panel=SCALE,
                                help="The Ray cluster (default: a local Ray).")
]
ChunkingsOpt = Annotated[
    Optional[str],
    typer.Option(callback=_chunkings_value, metavar="NAMES", rich_help_panel=CHECKS,
                 help="Chunkings of every side. Default: recorded,whole for a built-in parser; else "
                 "recorded,whole,char,fixed-2,3,5,8,13,40, token with --tokenizer, and split-all."),
]

def _filters(
    model: Optional[list[str]], route: Optional[list[str]], since: Optional[str], until: Optional[str],
    sample: Optional[str], sample_key: str, limit: Optional[int],
) -> Any:
    """The :class:`replay.capture.filters.Filters` of the filter options (values already checked
    by their callbacks); ``--since`` not before ``--until`` is a usage error (exit 2)."""
    from replay.capture.filters import Filters, parse_fraction
    from replay.capture.timestamps import parse_ts

    try:
        return Filters(
            models=tuple(model or ()), routes=tuple(route or ()),
            since=parse_ts(since) if since is not None else None, until=parse_ts(until) if until is not None else None,
            sample=parse_fraction(sample) if sample is not None else None, sample_key=sample_key, limit=limit,
        )
    except ValueError as exc:
        _fail(str(exc), 2)


def _finished_run(run: Optional[Path], *, report: bool = False) -> None:
    """Exit 1 when ``run`` was left by a command that stopped midway (``run.json`` ``incomplete``,
    :func:`replay.audit.mark_incomplete`): its tables must not be read as a finished run's.
    ``report``: the caller is ``replay report``, which finishes a run stopped during its report
    stage (its tables are whole: the report only reads them), so that stage is let through; not
    for a ``replay matrix`` run, whose report stage merges its sides' tables first, and which the
    message sends back to ``replay matrix --force``."""
    from replay.audit import incomplete_stage

    if run is None:
        return
    try:
        stage = incomplete_stage(run)
    except ValueError as exc:  # run.json not JSON
        _fail(str(exc))
    from replay.matrix_vars import recorded_order

    matrix = recorded_order(run) is not None  # replay matrix merges its tables in its report stage: none of it resumes
    if stage == "report" and report and not matrix:
        from replay.runmeta import run_writer

        if not run_writer(run):
            return
    if stage:
        from replay.runmeta import run_writer

        writer = run_writer(run)
        if writer:
            _fail(f"{run}: {writer} is writing this run (now in its {stage} stage): its tables are incomplete until it ends")
        redo = {"render": "replay render --run RUN, then replay stream --run RUN", "re-stream": "replay stream --run RUN",
                "report": "replay report --run RUN"}.get(stage)
        if matrix:
            again = "run `replay matrix` again with --force"
        else:
            again = ("run the command again: `replay audit` resumes; `replay ingest` needs --force"
                     + (f" (or finish it: {redo.replace('RUN', str(run))})" if redo else ""))
        _fail(f"{run}: the command that wrote this run stopped during {stage} (interrupted?): its tables are incomplete; {again}")


def _hold_run(ctx: Any, run: Path, command: str) -> None:
    """Hold ``run``'s lock (:class:`replay.runmeta.RunLock`) while the command ``replay
    <command>`` writes it, until the command ends (``ctx``: its click context, which releases
    it when closed, on an error or interrupt too); exit 1 in one line, touching nothing, while
    another command holds it. A folder that does not exist is made only for ``ingest``; the
    other commands go on unlocked and fail as they do on a folder that is not a run."""
    from replay.runmeta import RunInUseError, RunLock

    if command != "ingest" and not run.is_dir():
        return
    try:
        lock = RunLock(run, f"replay {command}")
    except RunInUseError as exc:
        _fail(str(exc))
    except OSError as exc:  # a folder this user cannot write
        _fail(f"{run}: cannot lock the run folder ({exc.strerror or exc})")
    ctx.call_on_close(lock.release)


def _changed_inputs(out: Path, paths: list[str]) -> str | None:
    """:func:`replay.runmeta.changed_inputs_message` for the captures ``paths`` name, or None when
    a local path does not exist or they cannot be listed (the command then fails on that)."""
    from replay.capture import discover
    from replay.capture.storage import is_uri
    from replay.runmeta import changed_inputs_message

    if not all(is_uri(p) or Path(p).exists() for p in paths):
        return None
    try:
        return changed_inputs_message(out, discover([str(p) for p in paths]))
    except OSError:
        return None


def _report_interrupted(run: Path) -> None:
    """Exit 130 in one line: a Ctrl-C or SIGTERM stopped the writing of ``run``'s reports (its
    tables are as they were)."""
    _fail(f"interrupted during report: {run}/report.md, report.html and exemplars/ may be stale or missing "
          f"(the tables are unchanged); run `replay report --run {run}` again", 130)


def _fail(msg: str, code: int = 1) -> None:
    err.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _nothing_ingested(meta: dict) -> None:
    """Exit 1 naming the files when the run ingested no exchange (:func:`replay.runmeta.nothing_ingested`);
    first a warning line on stderr per path discovery skipped (``ingest.skipped_files``); when it
    did, print a warning line on stderr per capture file that gave none
    (``run.json`` ``ingest.files_without_exchanges``, :func:`replay.capture.ingest.no_exchange_why`),
    except a file the filters dropped records of (what was asked; the filters' sentence says what was kept)."""
    from replay.runmeta import nothing_ingested

    stats = meta.get("ingest") or {}
    for f in stats.get("skipped_files") or []:  # what discovery left out: a link read once, a FIFO in a folder
        err.print(f"[bold yellow]warning:[/] skipped {escape(str(f['path']))}: {escape(f['detail'])}", highlight=False, soft_wrap=True)
    why = nothing_ingested(stats, [i["path"] for i in meta.get("inputs") or []])
    if why:
        _fail(why)
    for f in stats.get("files_without_exchanges") or []:
        if f.get("filtered"):
            continue
        hint = "; `replay query ingest_errors --run RUN` lists them" if f.get("errors") else ""
        err.print(f"[bold yellow]warning:[/] no exchange from {escape(str(f['file']))}: {escape(f['why'] + hint)}",
                  highlight=False, soft_wrap=True)


def _gates(fail_on: Optional[list[str]]) -> list[Any]:
    """Parse every ``--fail-on`` before any work; a bad one is a usage error (exit 2)."""
    from replay.verdicts import FailOnError, parse_fail_on

    try:
        return [parse_fail_on(e) for e in fail_on or []]
    except FailOnError as exc:
        _fail(str(exc), 2)
    return []


def _gate(gates: list[Any], verdicts: Any) -> None:
    """Print a line per ``--fail-on`` that holds (stderr) and exit with code 3 when any does; a
    gate over a check that judged no exchange (:func:`replay.verdicts.unmeasured`) exits 1 first."""
    from replay.verdicts import FAIL_ON_EXIT, tripped, unmeasured

    nothing = unmeasured(gates, verdicts)
    for line in nothing:  # a gate over nothing judged would pass on a count nobody measured: exit 1
        err.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
    if nothing:
        raise typer.Exit(1)
    hits = tripped(gates, verdicts)
    for line in hits:
        err.print(f"[bold red]failed:[/] {escape(line)}", highlight=False, soft_wrap=True)
    if hits:
        raise typer.Exit(FAIL_ON_EXIT)


def _tokenizer(path: Optional[Path]) -> Any:
    """The tokenizer ``--tokenizer`` names (:func:`replay.render.load_tokenizer`), None without
    one; fails naming the option when it cannot be loaded."""
    if path is None:
        return None
    from replay.render import load_tokenizer

    try:
        return load_tokenizer(path)
    except Exception as exc:
        _fail(f"--tokenizer {path}: {exc}")


def _captures(paths: list[str], skipped: list[dict] | None = None) -> list[Any]:
    """The capture files ``paths`` name (:func:`replay.capture.discover`: local files and folders,
    and ``s3://`` / ``gs://`` / ``az://`` URIs; it appends the paths it leaves out to ``skipped``
    when given); fails naming the path or URI that does not exist or cannot be listed (a URI whose
    backend is not installed: the extra to install), a pipe that cannot be read, or the folders
    when they hold no capture file at all."""
    import os
    import stat

    from replay.capture import discover
    from replay.capture.storage import StorageError

    for p in paths:  # a FIFO named directly is read to its end first: opening it waits for its writer
        try:
            fifo = stat.S_ISFIFO(os.stat(p).st_mode) and not str(p).startswith(("/dev/fd/", "/proc/"))  # not <(...)'s pipe
        except OSError:
            fifo = False
        if fifo:
            err.print(f"reading the FIFO {escape(str(p))} to its end before the audit (waiting for its writer)", highlight=False, soft_wrap=True)
    try:
        files = discover([str(p) for p in paths], skipped)
    except OSError as exc:  # StorageError is one
        _fail(str(exc))
    if not files and skipped:
        _fail(f"no capture file to read in {', '.join(str(p) for p in paths)}: "
              + "; ".join(f"skipped {s['path']}: {s['detail']}" for s in skipped))
    if not files:
        _fail(
            f"no capture file in {', '.join(str(p) for p in paths)}: folders are searched for .jsonl, .ndjson, .json, "
            ".sse, .har, .log and .mitm files (plain, .zst or .gz); name other files directly (e.g. *.txt with --capture-format sse)"
        )
    return files


def _resolve_sides(old: Optional[list[str]], new: Optional[list[str]], reference: Optional[list[str]],
                   sides_file: Optional[Path], legacy: dict[str, Any]) -> dict[str, Any]:
    """Every side's :class:`replay.side.SideSpec`, resolved once from ``--old``, ``--new``,
    ``--reference``, ``--sides`` and the deprecated per-side flags given (``legacy``: parameter
    name -> value, e.g. ``old_parser``; one deprecation line on stderr each). Exits 2 in one line
    naming the option for a value :func:`replay.side.resolve` refuses."""
    from replay.side import SideError, resolve

    flags: dict[str, dict[str, str]] = {}
    for name, value in legacy.items():
        if value is None:
            continue
        side, key = _LEGACY[name]
        flag = "--" + name.replace("_", "-")
        err.print(f"[bold yellow]warning:[/] {escape(flag)} is deprecated; give --{side} {key}=VALUE", highlight=False, soft_wrap=True)
        flags.setdefault(side, {})[key] = os.fspath(value)
    try:
        return resolve({"old": old, "new": new, "reference": reference}, sides_file, flags)
    except SideError as exc:
        _fail(str(exc), 2)
    return {}


def _config(
    sides: dict[str, Any],
    chat_template: Optional[list[str]],
    tokenizer: Any,
    parser: Optional[str],
    chunkings: Optional[str],
    replay_timeout: float = 10.0,
    renderer_spec: Optional[str] = None,
    date: Optional[str] = None,
    defer: bool = False,
) -> Any:
    """The run's :class:`replay.pipeline.AuditConfig`, built by the library from a
    :class:`replay.runspec.RunSpec` of these options; fails (exit 1) with the library's message,
    which names the option. ``sides``: ``{side: SideSpec}`` (:func:`_resolve_sides`), whose fields
    become the spec's per-side fields (:func:`replay.side.spec_fields`) and whose values as given
    go to ``run.json`` ``options.sides``; ``chat_template`` / ``tokenizer``: the repeatable
    options' values (``FILE`` or ``PATTERN=FILE``; ``replay stream`` passes one tokenizer path).
    ``defer``: leave the renderers and tokenizer unbuilt (``replay audit``:
    :func:`replay.audit.setup_render` checks them up front and builds them only in the processes
    that render)."""
    from replay.runspec import build_config, spec_from_options
    from replay.side import sides_json, spec_fields

    fields = spec_fields(sides)
    try:
        spec = spec_from_options(
            chat_templates=chat_template, tokenizers=tokenizer, chunkings=chunkings,
            renderer=renderer_spec, date=date, parser=parser, replay_timeout=replay_timeout, **fields,
        )
        cfg = build_config(spec, load=not defer)
    except UsageError as exc:  # a name that is no built-in: a bad option value
        _fail(str(exc), 2)
    except ValueError as exc:
        _fail(str(exc))
    # as given
    cfg.options.update(old_pythonpath=fields.get("old_pythonpath"), new_pythonpath=fields.get("new_pythonpath"), sides=sides_json(sides))
    return cfg


def _progress(quiet: bool) -> Any:
    """Progress on stderr (:func:`replay.progress.reporter`): a bar per stage on a terminal, a
    plain line every ~10 s elsewhere, nothing when ``quiet``."""
    from replay.progress import reporter

    return reporter(quiet)


def _duckdb(memory: Optional[str], threads: Optional[int], temp: Optional[Path]) -> Any:
    """The :class:`replay.sql.DuckDBSettings` of the ``--duckdb-*`` options (None: env, then default)."""
    import duckdb

    from replay.sql import ENV_MEMORY, DuckDBSettings

    limit = memory or os.environ.get(ENV_MEMORY)
    if limit:  # checked before any work: a bad size used to fail only at the report, after every stage ran
        try:
            duckdb.connect(":memory:", config={"memory_limit": limit}).close()
        except duckdb.Error as exc:
            _fail(f"Invalid value for '--duckdb-memory' / ${ENV_MEMORY}: {limit!r}: {str(exc).splitlines()[0]} (e.g. 1GB, 512MB)", 2)
    return DuckDBSettings(memory_limit=memory, threads=threads, temp_directory=str(temp) if temp is not None else None)


def _engine(engine: str, ray_address: Optional[str], cfg: Any) -> Any:
    """The stage executor of ``--engine``/``--ray-address`` (None: this process); recorded in
    ``cfg.options`` for run.json. Exits 2 for ``--ray-address`` without ``--engine ray``."""
    if engine != "ray":
        if ray_address:
            _fail("--ray-address needs --engine ray", 2)
        return None
    from replay.executors import RayEngine

    cfg.options.update(engine="ray", ray_address=ray_address)
    return RayEngine(address=ray_address)


def _default_out() -> Path:
    return Path("runs") / time.strftime("audit-%Y%m%d-%H%M%S")


# --- commands --------------------------------------------------------------------------------------


@app.command(cls=_GroupedHelp, short_help="Ingest, re-render and re-stream captures; count; report.")
def audit(
    paths: Annotated[list[str], typer.Argument(help="Capture files or folders (recursive): .jsonl/.ndjson/.json/.sse/.har/.log/.mitm, plain, .zst or .gz; or s3://, gs://, az:// URIs of objects or prefixes.")],
    out: Annotated[Optional[Path], typer.Option("--out", rich_help_panel=OUTPUT, help="Run folder to write (default runs/audit-<time>).")] = None,
    old: OldSide = None,
    new: NewSide = None,
    reference: RefSide = None,
    sides: SidesFileOpt = None,
    chat_template: TemplateOpt = None,
    tokenizer: RenderTokenizerOpt = None,
    renderer: RendererOpt = None,
    parser: ParserOpt = None,
    date: DateOpt = None,
    old_serializer: OldSer = None,
    new_serializer: NewSer = None,
    reference_serializer: RefSer = None,
    old_preparer: OldPreparer = None,
    new_preparer: NewPreparer = None,
    reference_preparer: RefPreparer = None,
    old_chat_template: OldTemplate = None,
    new_chat_template: NewTemplate = None,
    reference_chat_template: RefTemplate = None,
    old_renderer: OldRendererOpt = None,
    new_renderer: NewRendererOpt = None,
    reference_encoder: RefEncoderOpt = None,
    old_parser: OldParser = None,
    new_parser: NewParser = None,
    reference_parser: RefParser = None,
    old_python: OldPython = None,
    new_python: NewPython = None,
    old_pythonpath: OldPath = None,
    new_pythonpath: NewPath = None,
    old_render_in: OldRenderIn = None,
    new_render_in: NewRenderIn = None,
    chunkings: ChunkingsOpt = None,
    replay_timeout: TimeoutOpt = 10.0,
    redact: RedactOpt = False,
    max_line_bytes: MaxLineOpt = 32 << 20,
    capture_format: CaptureFormatOpt = None,
    fail_on: FailOnOpt = None,
    exemplar_text: ExemplarTextOpt = False,
    model: ModelOpt = None,
    route: RouteOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    sample: SampleOpt = None,
    sample_key: SampleKeyOpt = "exchange_id",
    limit: LimitOpt = None,
    jobs: JobsOpt = None,
    parallel_ingest: ParallelIngestOpt = False,
    overlap: OverlapOpt = True,
    batch_rows: BatchRowsOpt = 512,
    force: Annotated[
        bool,
        typer.Option(
            "--force", rich_help_panel=OUTPUT,
            help="Replace the run --out holds (without it, only an interrupted audit of the same inputs is resumed).",
        ),
    ] = False,
    quiet: QuietOpt = False,
    duckdb_memory: DuckMemOpt = None,
    duckdb_threads: DuckThreadsOpt = None,
    duckdb_temp: DuckTempOpt = None,
    engine: EngineOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Ingest captures, re-render and re-stream every exchange, count what differs, write report.md.

    An --out that holds a run is refused without --force; an interrupted audit rerun with the
    same captures and options resumes where it stopped.

    Example: replay audit samples/ --out runs/samples --fail-on broken
    """
    from replay.audit import audit as run_audit
    from replay.report import rich_table, summary_by_side
    from replay.report import fidelity_sentence

    gates = _gates(fail_on)
    filters = _filters(model, route, since, until, sample, sample_key, limit)
    side_specs = _resolve_sides(old, new, reference, sides, dict(
        old_serializer=old_serializer, new_serializer=new_serializer, reference_serializer=reference_serializer,
        old_preparer=old_preparer, new_preparer=new_preparer, reference_preparer=reference_preparer,
        old_chat_template=old_chat_template, new_chat_template=new_chat_template, reference_chat_template=reference_chat_template,
        old_renderer=old_renderer, new_renderer=new_renderer, reference_encoder=reference_encoder,
        old_parser=old_parser, new_parser=new_parser, reference_parser=reference_parser,
        old_python=old_python, new_python=new_python, old_pythonpath=old_pythonpath, new_pythonpath=new_pythonpath,
        old_render_in=old_render_in, new_render_in=new_render_in,
    ))
    cfg = _config(side_specs, chat_template, tokenizer, parser, chunkings, replay_timeout, renderer_spec=renderer, date=date, defer=True)
    if redact and exemplar_text:
        _fail("--redact (hash message text at ingest) and --exemplar-text (show it in the exemplars) contradict each other", 2)
    cfg.options.update(redact=redact, max_line_bytes=max_line_bytes)
    _executor(cfg, jobs, batch_rows)
    cfg.parallel_ingest = parallel_ingest
    cfg.overlap = overlap
    if not overlap:
        cfg.options.update(overlap=False)
    if parallel_ingest:
        cfg.options.update(parallel_ingest=True)
    skipped: list[dict] = []
    files = _captures(paths, skipped)  # listed once: the audit reads exactly these (a bucket may change meanwhile)
    run_dir = out or _default_out()
    from replay.audit import RunExistsError

    executor = _engine(engine, ray_address, cfg)
    try:
        with _progress(quiet) as stage:
            result = run_audit(files, run_dir, cfg, stage=stage, capture_format=capture_format,
                               redact=not exemplar_text, hash_text=redact, max_line_bytes=max_line_bytes, filters=filters,
                               duckdb_settings=_duckdb(duckdb_memory, _threads_of(duckdb_threads, jobs), duckdb_temp), engine=executor, force=force,
                               skipped=skipped)
    except (RunExistsError, UsageError) as exc:  # usage errors, raised before any work
        _fail(str(exc), 2)
    except (OSError, ValueError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        from replay.audit import incomplete_stage

        _fail(f"interrupted during {incomplete_stage(run_dir) or 'start-up'}: {run_dir} is incomplete (run.json says so; "
              "replay query and replay report refuse it); run the audit again", 130)
    finally:
        if executor is not None:
            executor.close()
    console.print(rich_table(result.report.results["verdicts"], title="verdicts (exchanges; old vs new against the reference)"))
    console.print(plain(fidelity_sentence(result.report.results["fidelity"])))
    if result.meta.get("filters"):
        console.print(plain(f"Filters: {result.meta['filters']['sentence']}."))
    console.print(rich_table(summary_by_side(result.report.results["summary"]), title=f"replay audit: {run_dir}"))
    for line in result.report.headlines:
        console.print(plain(f"• {line}"), soft_wrap=True)
    total = sum(result.seconds.values())
    console.print(plain(f"\nWrote {result.report.path} and the tables in {run_dir}/ ({total:.2f} s)."))
    _nothing_ingested(result.meta)
    _gate(gates, result.report.results["verdicts"])


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

    from replay.capture import ingest as run_ingest
    from replay.capture.files import file_size, input_record
    from replay.runmeta import check_out_folder, clear_run, existing_run, filters_meta, mark_incomplete, versions, write_meta  # not replay.audit: its stages' imports

    filters = _filters(model, route, since, until, sample, sample_key, limit)
    try:
        check_out_folder(out)
    except ValueError as exc:
        _fail(str(exc))
    _hold_run(ctx, out, "ingest")  # before the run is looked at: another command may be writing it
    held = existing_run(out)
    if held and not force:
        _fail(_changed_inputs(out, paths) or f"--out {out} already holds a run ({', '.join(held)}); give --force to replace it, or another --out", 2)
    skipped: list[dict] = []
    files = _captures(paths, skipped)
    tok = _tokenizer(tokenizer)
    if held:
        clear_run(out)
    out.mkdir(parents=True, exist_ok=True)
    mark_incomplete(out, {}, "ingest")
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
            from replay.pool import close_pools

            close_pools()
    stats.skipped_files = [*skipped, *stats.skipped_files]
    meta = {"options": {"capture_format": capture_format, "redact": redact, "max_line_bytes": max_line_bytes, "jobs": jobs}, "versions": versions(),
            "inputs": [input_record(f) for f in files], "ingest": dataclasses.asdict(stats)}
    if filters.active:
        meta["filters"] = filters_meta(filters, stats)
    write_meta(out, meta)
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


def _threads_of(duckdb_threads: Optional[int], jobs: Optional[int]) -> Optional[int]:
    """DuckDB's threads for a command with ``--jobs``: ``--duckdb-threads`` (or its variable) when
    given, else ``--jobs`` when given (at most :data:`replay.sql.MAX_DEFAULT_THREADS`: ``--jobs 1``
    is one core for the report too), else None (the CPU count, :class:`replay.sql.DuckDBSettings`)."""
    if duckdb_threads is not None or jobs is None:
        return duckdb_threads
    from replay.sql import MAX_DEFAULT_THREADS

    return min(jobs, MAX_DEFAULT_THREADS)


def _executor(cfg: Any, jobs: Optional[int], batch_rows: int) -> None:
    """Set ``--jobs`` (default: the CPU count) and ``--batch-rows`` on the config and its spec;
    both go to ``run.json`` options."""
    import dataclasses

    cfg.jobs = jobs if jobs is not None else (os.cpu_count() or 1)
    cfg.batch_rows = batch_rows
    if cfg.spec is not None:
        cfg.spec = dataclasses.replace(cfg.spec, batch_rows=batch_rows)
    cfg.options.update(jobs=cfg.jobs, batch_rows=batch_rows)


def _stage_command(ctx: Any, which: str, run: Path, cfg: Any, quiet: bool, duckdb_settings: Any = None, engine: str = "local", ray_address: Optional[str] = None) -> None:
    _hold_run(ctx, run, "render" if which == "render" else "stream")
    from replay.matrix_vars import matrix_rewrite_refusal

    refusal = matrix_rewrite_refusal(run, "render" if which == "render" else "stream")
    if refusal:  # its tables hold the matrix's named sides
        _fail(refusal)
    from replay.audit import mark_incomplete, read_meta, write_meta, write_report
    from replay.pipeline import count_exchanges, run_render, run_stream, validate_specs
    from replay.sides import close_sides

    try:
        n = count_exchanges(run)
        meta = read_meta(run)  # a run.json that is not JSON fails here, before any table is rewritten
        validate_specs(cfg)
    except (FileNotFoundError, ValueError) as exc:
        close_sides(cfg)
        _fail(str(exc), 2 if isinstance(exc, UsageError) else 1)
    executor = _engine(engine, ray_address, cfg)
    mark_incomplete(run, meta, which)
    try:
        with _progress(quiet) as stage:
            with stage(which, n) as advance:
                if executor is not None:
                    from replay.pipeline import RENDER, STREAM

                    got = executor.run_stage(run, RENDER if which == "render" else STREAM, cfg, advance)
                    counts = got["renders"] if which == "render" else (got["streams"], got["calls"])
                else:
                    counts = run_render(run, cfg, progress=advance) if which == "render" else run_stream(run, cfg, progress=advance)
    except ValueError as exc:  # replay.executors.EngineError: Ray missing or unreachable
        _fail(str(exc))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: run.json keeps saying the stage is incomplete
        command = "render" if which == "render" else "stream"
        _fail(f"interrupted during {which}: {run} is incomplete (run.json says so; replay query and replay report refuse it); "
              f"run `replay {command} --run {run}` again with the same options: it resumes", 130)
    finally:
        from replay.pool import close_pools

        close_pools()
        sides = close_sides(cfg)
        if executor is not None:
            executor.close()
    meta.pop("incomplete", None)
    from replay.audit import executor_meta

    sides, executors = executor_meta(cfg, sides)
    meta["executors"] = {**meta.get("executors", {}), **executors}
    if sides:
        meta["sides"] = {**meta.get("sides", {}), **{s: {**v, "stage": which} for s, v in sides.items()}}
    given = {k: v for k, v in cfg.options.items() if k in _STAGE_KEYS[which]}
    if which == "re-stream" and given.get("tokenizer") is None:
        given.pop("tokenizer", None)  # the render stage's tokenizer stays on record
    if "sides" in given:  # the other stage's keys of each side stay as the run had them
        from replay.side import merge_stage

        given["sides"] = merge_stage((meta.get("options") or {}).get("sides") or {}, given["sides"], which)
    meta["options"] = {**meta.get("options", {}), **given}
    if which == "re-stream":
        from replay.pipeline import chunking_plan

        meta["chunkings"] = chunking_plan(cfg)
    write_meta(run, meta)
    try:
        write_report(run, meta, duckdb_settings=duckdb_settings)
    except ValueError as exc:  # a table of the run DuckDB cannot read
        _fail(f"{which} done, report.md not written: {exc}")
    except KeyboardInterrupt:
        _report_interrupted(run)
    wrote = f"{counts:,} renders rows" if which == "render" else f"{counts[0]:,} streams rows and {counts[1]:,} calls rows"
    console.print(plain(f"{which}: wrote {wrote}; {run}/report.md updated."))


_SIDE_KEYS = {"old_python", "new_python", "old_pythonpath", "new_pythonpath", "sides"}
_RENDER_IN_KEYS = {"old_render_in", "new_render_in"}
_STAGE_KEYS = {
    "render": {"engine", "ray_address", "old_serializer", "new_serializer", "reference_serializer", "renderer", "chat_template", "tokenizer", "reference_encoder", "date",
               "chat_template_routes", "tokenizer_routes", "old_renderer", "new_renderer", "reference_chat_template", "special_tokens", "chat_template_paths",
               "old_preparer", "new_preparer", "reference_preparer", *_SIDE_KEYS, *_RENDER_IN_KEYS},
    "re-stream": {"engine", "ray_address", "parser", "old_parser", "new_parser", "reference_parser", "chunkings", "tokenizer", "replay_timeout", *_SIDE_KEYS},
}


@app.command(cls=_GroupedHelp, short_help="Re-render the prompts of an ingested run.")
def render(
    ctx: typer.Context,
    run: RunOpt,
    old: OldSide = None,
    new: NewSide = None,
    reference: RefSide = None,
    sides: SidesFileOpt = None,
    chat_template: TemplateOpt = None,
    tokenizer: RenderTokenizerOpt = None,
    renderer: RendererOpt = None,
    date: DateOpt = None,
    old_serializer: OldSer = None,
    new_serializer: NewSer = None,
    reference_serializer: RefSer = None,
    old_preparer: OldPreparer = None,
    new_preparer: NewPreparer = None,
    reference_preparer: RefPreparer = None,
    old_chat_template: OldTemplate = None,
    new_chat_template: NewTemplate = None,
    reference_chat_template: RefTemplate = None,
    old_renderer: OldRendererOpt = None,
    new_renderer: NewRendererOpt = None,
    reference_encoder: RefEncoderOpt = None,
    old_python: OldPython = None,
    new_python: NewPython = None,
    old_pythonpath: OldPath = None,
    new_pythonpath: NewPath = None,
    old_render_in: OldRenderIn = None,
    new_render_in: NewRenderIn = None,
    jobs: JobsOpt = None,
    batch_rows: BatchRowsOpt = 512,
    quiet: QuietOpt = False,
    duckdb_memory: DuckMemOpt = None,
    duckdb_threads: DuckThreadsOpt = None,
    duckdb_temp: DuckTempOpt = None,
    engine: EngineOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Re-render the prompts of an ingested run (rewrites renders.parquet and report.md).

    An interrupted render rerun with the same options resumes: the batches already written are kept.

    Example: replay render --run runs/samples --chat-template qwen3.jinja --tokenizer tok/
    """
    side_specs = _resolve_sides(old, new, reference, sides, dict(
        old_serializer=old_serializer, new_serializer=new_serializer, reference_serializer=reference_serializer,
        old_preparer=old_preparer, new_preparer=new_preparer, reference_preparer=reference_preparer,
        old_chat_template=old_chat_template, new_chat_template=new_chat_template, reference_chat_template=reference_chat_template,
        old_renderer=old_renderer, new_renderer=new_renderer, reference_encoder=reference_encoder,
        old_python=old_python, new_python=new_python, old_pythonpath=old_pythonpath, new_pythonpath=new_pythonpath,
        old_render_in=old_render_in, new_render_in=new_render_in,
    ))
    cfg = _config(side_specs, chat_template, tokenizer, None, None, renderer_spec=renderer, date=date)
    _executor(cfg, jobs, batch_rows)
    _stage_command(ctx, "render", run, cfg, quiet, _duckdb(duckdb_memory, _threads_of(duckdb_threads, jobs), duckdb_temp), engine, ray_address)


@app.command(cls=_GroupedHelp, short_help="Re-stream the raw completions of an ingested run.")
def stream(
    ctx: typer.Context,
    run: RunOpt,
    old: OldSide = None,
    new: NewSide = None,
    reference: RefSide = None,
    sides: SidesFileOpt = None,
    parser: ParserOpt = None,
    old_parser: OldParser = None,
    new_parser: NewParser = None,
    reference_parser: RefParser = None,
    old_python: OldPython = None,
    new_python: NewPython = None,
    old_pythonpath: OldPath = None,
    new_pythonpath: NewPath = None,
    chunkings: ChunkingsOpt = None,
    tokenizer: TokenizerOpt = None,
    replay_timeout: TimeoutOpt = 10.0,
    jobs: JobsOpt = None,
    batch_rows: BatchRowsOpt = 512,
    quiet: QuietOpt = False,
    duckdb_memory: DuckMemOpt = None,
    duckdb_threads: DuckThreadsOpt = None,
    duckdb_temp: DuckTempOpt = None,
    engine: EngineOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Re-stream the raw completions of an ingested run (rewrites streams/calls.parquet and report.md).

    An interrupted re-stream rerun with the same options resumes: the batches already written are kept.

    Example: replay stream --run runs/samples --old parser=my_parsers.py:OldHermes --chunkings whole,char
    """
    side_specs = _resolve_sides(old, new, reference, sides, dict(
        old_parser=old_parser, new_parser=new_parser, reference_parser=reference_parser,
        old_python=old_python, new_python=new_python, old_pythonpath=old_pythonpath, new_pythonpath=new_pythonpath,
    ))
    cfg = _config(side_specs, None, tokenizer, parser, chunkings, replay_timeout)
    _executor(cfg, jobs, batch_rows)
    _stage_command(ctx, "re-stream", run, cfg, quiet, _duckdb(duckdb_memory, _threads_of(duckdb_threads, jobs), duckdb_temp), engine, ray_address)


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
    from replay.audit import read_meta, write_report

    gates = _gates(fail_on)
    _hold_run(ctx, run, "report")
    _finished_run(run, report=True)
    try:
        meta = read_meta(run)
        if (meta.get("options") or {}).get("matrix"):  # a replay matrix run: its own report (replay.matrix)
            from replay.matrix import rewrite_report

            md = rewrite_report(run, redact=not exemplar_text, duckdb_settings=_duckdb(duckdb_memory, duckdb_threads, duckdb_temp)).path
            sys.stdout.write(visible(md.read_text(encoding="utf-8")))
            return
        written = write_report(run, meta, redact=not exemplar_text, duckdb_settings=_duckdb(duckdb_memory, duckdb_threads, duckdb_temp))
        if meta.pop("incomplete", None) == "report":  # the report an audit was stopped in is written now: the run is finished
            from replay.runmeta import write_meta

            write_meta(run, meta)
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


@app.callback(invoke_without_command=True)
def _main(version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False) -> None:
    if version:
        console.print(f"replay {__version__}")
        raise typer.Exit()


from replay.matrix_cli import register as _register_matrix  # noqa: E402

_register_matrix(sys.modules[__name__])  # adds `replay matrix` to app

from replay.repro.command import register as _register_repro  # noqa: E402  (hook: the `repro` command)

_register_repro(app)

if __name__ == "__main__":  # pragma: no cover
    app()
