"""The ``replay`` Typer application and what every command shares at run time: the consoles
(stdout with control characters made visible, stderr), the one-line usage errors
(:class:`_OneLineErrors`), the grouped ``--help`` (:class:`_GroupedHelp`), SIGTERM handled as
Ctrl-C, and ``replay --version``. The commands register on :data:`app` from their modules
(:mod:`replay.cli`).
"""

from __future__ import annotations

import os
import sys
import typer
import typer.core

from replay import __version__
from replay.term import visible
from rich.console import Console, ConsoleDimensions
from rich.markup import escape as _markup_escape
from typing import Annotated, Any


os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


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


@app.callback(invoke_without_command=True)
def _main(version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False) -> None:
    if version:
        console.print(f"replay {__version__}")
        raise typer.Exit()


if __name__ == "__main__":  # pragma: no cover
    app()
