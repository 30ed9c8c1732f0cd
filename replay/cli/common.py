"""Helpers the commands share: options resolved into library values (filters, sides, the run's
config built once from a :class:`replay.runspec.RunSpec`, DuckDB settings, the Ray engine),
the run folder held and checked (:class:`replay.runner.runfolder.RunFolder`), captures
discovered, ``--fail-on`` gates, and the one-line failures (:func:`_fail`).
"""

from __future__ import annotations

import os
import time
import typer
import typer.core

from pathlib import Path
from replay.cli.app import err, escape
from replay.cli.options import _LEGACY
from replay.errors import UsageError
from typing import Any, Optional


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
    :meth:`replay.runner.runfolder.RunFolder.mark`): its tables must not be read as a finished run's.
    ``report``: the caller is ``replay report``, which finishes a run stopped during its report
    stage (its tables are whole: the report only reads them), so that stage is let through; not
    for a ``replay matrix`` run, whose report stage merges its sides' tables first, and which the
    message sends back to ``replay matrix --force``."""
    from replay.matrix_vars import recorded_order
    from replay.runner.runfolder import RunFolder

    if run is None:
        return
    folder = RunFolder(run, "replay")
    try:
        stage = folder.incomplete_stage()
    except ValueError as exc:  # run.json not JSON
        _fail(str(exc))
    matrix = recorded_order(run) is not None  # replay matrix merges its tables in its report stage: none of it resumes
    if stage == "report" and report and not matrix:
        if not folder.writer():
            return
    if stage:
        writer = folder.writer()
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


def _hold_run(ctx: Any, run: Path, command: str) -> Any:
    """The :class:`replay.runner.runfolder.RunFolder` of ``run``, its lock held while the command
    ``replay <command>`` writes it, until the command ends (``ctx``: its click context, which
    releases it when closed, on an error or interrupt too); exit 1 in one line, touching nothing,
    while another command holds it. A folder that does not exist is made only for ``ingest``; the
    other commands go on unlocked and fail as they do on a folder that is not a run."""
    from replay.runner.runfolder import RunFolder, RunInUseError

    folder = RunFolder(run, f"replay {command}")
    try:
        folder.lock(create=command == "ingest")
    except RunInUseError as exc:
        _fail(str(exc))
    except OSError as exc:  # a folder this user cannot write
        _fail(f"{run}: cannot lock the run folder ({exc.strerror or exc})")
    ctx.call_on_close(folder.release)
    return folder


def _changed_inputs(out: Path, paths: list[str]) -> str | None:
    """:func:`replay.runner.runfolder.changed_inputs_message` for the captures ``paths`` name, or None when
    a local path does not exist or they cannot be listed (the command then fails on that)."""
    from replay.capture import discover
    from replay.capture.storage import is_uri
    from replay.runner.runfolder import changed_inputs_message

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
    """Exit 1 naming the files when the run ingested no exchange (:func:`replay.runner.runfolder.nothing_ingested`);
    first a warning line on stderr per path discovery skipped (``ingest.skipped_files``); when it
    did, print a warning line on stderr per capture file that gave none
    (``run.json`` ``ingest.files_without_exchanges``, :func:`replay.capture.ingest.no_exchange_why`),
    except a file the filters dropped records of (what was asked; the filters' sentence says what was kept)."""
    from replay.runner.runfolder import nothing_ingested

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
    *,
    jobs: Optional[int] = None,
    batch_rows: int = 512,
    recorded: Optional[dict[str, Any]] = None,
    execution: Optional[dict[str, Any]] = None,
    engine: str = "local",
    ray_address: Optional[str] = None,
) -> Any:
    """The run's :class:`replay.runspec.AuditConfig`, built by the library from a
    :class:`replay.runspec.RunSpec` of these options; fails (exit 1) with the library's message,
    which names the option. ``sides``: ``{side: SideSpec}`` (:func:`_resolve_sides`), whose fields
    become the spec's per-side fields (:func:`replay.side.spec_fields`) and whose values as given
    go to ``run.json`` ``options.sides``; ``chat_template`` / ``tokenizer``: the repeatable
    options' values (``FILE`` or ``PATTERN=FILE``; ``replay stream`` passes one tokenizer path).
    ``defer``: leave the renderers and tokenizer unbuilt (``replay audit``:
    :func:`replay.runner.plan.setup_render` checks them up front and builds them only in the processes
    that render).

    Every option is resolved here, once, into the spec (``--jobs``, default the CPU count;
    ``--batch-rows``; ``execution``: ``parallel_ingest`` and ``overlap`` of ``replay audit``) and
    into ``run.json`` ``options`` (``recorded``: the command's other options as given, after the
    sides, ``jobs`` and ``batch_rows``, then ``overlap``/``parallel_ingest`` when not their
    defaults, then the engine): the config is not written to afterwards
    (:class:`replay.runspec.AuditConfig` refuses it)."""
    from replay.runspec import build_config, spec_from_options
    from replay.side import sides_json, spec_fields

    fields = spec_fields(sides)
    execution = dict(execution or {})
    jobs = jobs if jobs is not None else (os.cpu_count() or 1)
    # run.json options as given, in the order they were always written
    given: dict[str, Any] = {"old_pythonpath": fields.get("old_pythonpath"), "new_pythonpath": fields.get("new_pythonpath"), "sides": sides_json(sides)}
    given.update(recorded or {})
    given.update(jobs=jobs, batch_rows=batch_rows)
    if not execution.get("overlap", True):
        given["overlap"] = False
    if execution.get("parallel_ingest"):
        given["parallel_ingest"] = True
    if engine == "ray":
        given.update(engine="ray", ray_address=ray_address)
    try:
        spec = spec_from_options(
            chat_templates=chat_template, tokenizers=tokenizer, chunkings=chunkings,
            renderer=renderer_spec, date=date, parser=parser, replay_timeout=replay_timeout, **fields,
            jobs=jobs, batch_rows=batch_rows, **execution,
        )
        cfg = build_config(spec, load=not defer, recorded=given)
    except UsageError as exc:  # a name that is no built-in: a bad option value
        _fail(str(exc), 2)
    except ValueError as exc:
        _fail(str(exc))
    return cfg


def _progress(quiet: bool) -> Any:
    """Progress on stderr (:func:`replay.runner.progress.reporter`): a bar per stage on a terminal, a
    plain line every ~10 s elsewhere, nothing when ``quiet``."""
    from replay.runner.progress import reporter

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
    """The stage executor of ``--engine``/``--ray-address`` (None: this process); ``run.json``
    records them from :func:`_config`. Exits 2 for ``--ray-address`` without ``--engine ray``."""
    if engine != "ray":
        if ray_address:
            _fail("--ray-address needs --engine ray", 2)
        return None
    from replay.runner.executors import RayEngine

    return RayEngine(address=ray_address)


def _default_out() -> Path:
    return Path("runs") / time.strftime("audit-%Y%m%d-%H%M%S")


def _threads_of(duckdb_threads: Optional[int], jobs: Optional[int]) -> Optional[int]:
    """DuckDB's threads for a command with ``--jobs``: ``--duckdb-threads`` (or its variable) when
    given, else ``--jobs`` when given (at most :data:`replay.sql.MAX_DEFAULT_THREADS`: ``--jobs 1``
    is one core for the report too), else None (the CPU count, :class:`replay.sql.DuckDBSettings`)."""
    if duckdb_threads is not None or jobs is None:
        return duckdb_threads
    from replay.sql import MAX_DEFAULT_THREADS

    return min(jobs, MAX_DEFAULT_THREADS)
