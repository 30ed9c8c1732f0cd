"""``replay repro``: a thin layer over :func:`replay.repro.run.repro` (a failure shrunk to an upstream-style test)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from replay.cli.app import app
# the command's module stays light (the CLI imports every command's module at start-up): the
# package's constants only; replay.repro's modules (DuckDB, Arrow, the stages) load when it runs
from replay.repro import DEFAULT_SECONDS, STREAM_CHECKS

__all__ = ["repro_command"]


def _check(value: str) -> str:
    if value not in STREAM_CHECKS:
        raise typer.BadParameter(f"{value!r} is not a stream check; one of: {', '.join(STREAM_CHECKS)}")
    return value


def _side(value: Optional[str]) -> Optional[str]:
    if value is not None and value not in ("old", "new"):
        raise typer.BadParameter(f"{value!r} is not one of: old, new")
    return value


def _fixed(value: str) -> str:
    if value not in ("old", "new", "reference"):
        raise typer.BadParameter(f"{value!r} is not one of: old, new, reference")
    return value


def _seconds(value: float) -> float:
    if not value > 0:
        raise typer.BadParameter(f"{value!r} is not a number of seconds > 0")
    return value


@app.command("repro", short_help="Shrink a failure to an upstream-style test, proven before/after.")
def repro_command(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="The run folder (of `replay audit`).")],
    exchange_id: Annotated[str, typer.Argument(metavar="ID", help="The exchange's id (exchanges.exchange_id).")],
    check: Annotated[str, typer.Option("--check", callback=_check, help="The stream check the exchange fails: dropped-call, argument-mismatch or another stream check (see checks-and-verdicts.md).")],
    side: Annotated[Optional[str], typer.Option("--side", callback=_side, help="old | new: the side that fails (default: new when the new side fails, else old).")] = None,
    fixed: Annotated[str, typer.Option("--fixed", callback=_fixed, help="old | new | reference: the side the test must pass on.")] = "reference",
    out: Annotated[Optional[Path], typer.Option("--out", help="Folder for the test file(s) (default RUN/repro).")] = None,
    keep_text: Annotated[bool, typer.Option("--keep-text", help="Write the user text as captured (default: masked as the exemplars mask it).")] = False,
    max_seconds: Annotated[float, typer.Option("--max-seconds", callback=_seconds, help="Time bound of the shrinking, in seconds.")] = DEFAULT_SECONDS,
    fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text",
) -> None:
    """Shrink one exchange's failure of a stream check to the smallest completion, tools and
    chunking that still fail on that side (re-run in the side's own interpreter) while the
    reference passes; write it as a pytest file in the framework's own suite style (SGLang,
    vLLM, or replay's parser protocol) and run it: it must fail on the broken side and pass on
    the fixed one, else nothing is written (exit 1).

    Example: replay repro runs/sglang B12 --check dropped-call --fixed new
    """
    from replay.repro.judge import ReproError
    from replay.repro.run import repro

    if fmt not in ("text", "json"):
        raise typer.BadParameter(f"{fmt!r} is not one of: text, json", param_hint="'--format'")
    try:
        got = repro(run, exchange_id, check, side=side, fixed=fixed, out=out, keep_text=keep_text, seconds=max_seconds)
    except ReproError as exc:
        sys.stderr.write(f"replay repro: {exc}\n")
        raise typer.Exit(1) from None
    except OSError as exc:  # --out a file, a folder it cannot write, ...
        where = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(f"replay repro: {where}{exc.strerror or exc}\n")
        raise typer.Exit(1) from None
    if fmt == "json":
        sys.stdout.write(json.dumps(got.as_json(), indent=2) + "\n")
    else:
        sys.stdout.write("\n".join(got.lines()) + "\n")
