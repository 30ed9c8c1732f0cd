"""``replay matrix``: N sides in one audit, each judged against the one reference.

A matrix is an audit of any number of named sides (DESIGN.md, "side"): five SGLang releases in
their venvs, a pull request's checkout, the built-in parser. The sides come from a sides file
(:func:`replay.side.load_sides_file`): every ``[sides.NAME]`` table is a side, in the order the
file lists them (the release order), except the reference (the table named ``reference``, or the
one top-level ``reference = "NAME"`` names; without one the reference is the built-in one).

What runs (:func:`run_matrix`):

1. one ingest of the captures into ``RUN`` (:func:`replay.capture.ingest`);
2. the sides two at a time as the old and new side of the existing stages
   (:func:`replay.runner.driver.run_render`, :func:`replay.runner.driver.run_stream`), each pair in a work
   folder ``RUN/.matrix/K`` holding links to the run's ``exchanges`` and ``tools`` tables: each
   side is rendered and re-streamed once; with an odd number of sides the last one's partner is
   the built-in side, whose rows are dropped;
3. the pairs' ``renders``, ``streams`` and ``calls`` rows joined into ``RUN``'s tables with
   ``side`` set to each side's name (the ``side`` column is free text, :mod:`replay.tables`), the
   reference's rows taken once (the first pair's);
4. the report: the queries ``matrix`` and ``matrix_faults`` (``queries/``, over the view
   ``side_states``: each side judged alone by the check registry's predicates) with the DuckDB
   variables ``matrix_sides`` and ``matrix_baseline`` set (:func:`matrix_connect`); written by
   :mod:`replay.report.matrix` to the terminal, ``report.md`` and ``report.html``.

A side without a ``serializer`` gets :data:`DEFAULT_SERIALIZER`, whatever its place in a pair (an
audit's old and new sides have different defaults; a matrix's sides are alike). ``replay audit``
is untouched: it is the matrix of its two sides (``replay query matrix --run RUN`` on an audit
reads ``old`` and ``new`` as the sides, ``old`` as the baseline).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from replay.errors import UsageError
from replay.side import SideError, SideSpec, load_sides_file

__all__ = ["DEFAULT_SERIALIZER", "RESERVED", "MatrixSides", "MatrixResult", "matrix_sides", "run_matrix", "matrix_connect", "merge_pairs", "rewrite_report"]

#: The tool serializer of a matrix side that names none: the default of an audit's ``new`` side
#: (:class:`replay.runspec.RunSpec` ``new_serializer``), the client's fields as sent.
DEFAULT_SERIALIZER = "client-fields"

#: Side names a matrix side cannot take: they name rows of their own in the tables.
RESERVED = ("reference", "served")

#: The tables the stages write, whose rows carry a ``side``.
SIDE_TABLES = ("renders", "streams", "calls")


class MatrixError(UsageError):
    """A matrix that cannot run as asked: no side, a reserved side name, an unknown baseline. The
    message names the sides file or option; the CLI prints it in one line and exits 2."""


@dataclass(frozen=True)
class MatrixSides:
    """The sides of a matrix, read from a sides file: ``names`` in release order, ``specs``
    ``{name: SideSpec}``, ``reference`` the reference side's SideSpec (None: the built-in one),
    ``baseline`` the name the others are compared with (default the first side)."""

    path: str
    names: tuple[str, ...]
    specs: dict[str, SideSpec]
    reference: SideSpec | None
    baseline: str


def matrix_sides(sides_file: str | os.PathLike[str], baseline: str | None = None) -> MatrixSides:
    """The sides of the sides file ``sides_file`` (module docstring): every ``[sides.NAME]`` table
    in file order but the reference's. ``baseline``: a side's name (default the first side).
    Raises :class:`replay.side.SideError` as :func:`replay.side.load_sides_file` does, and
    :class:`MatrixError` (both usage errors naming the file) for a file whose only table is the
    reference, a side named ``served`` (or ``reference`` while another table is the reference), a
    top-level ``old`` / ``new`` naming a table (a matrix has no old and new roles: its tables are
    its sides, in order), a side's name that is empty, holds a comma or a control character or
    has spaces at its ends (the reports list the sides as ``a, b, c``), or a baseline that names
    no side."""
    file = load_sides_file(sides_file)
    where = f"--sides {file.path}"
    if set(file.chosen) - {"reference"} and any(file.chosen[r] != r for r in file.chosen if r != "reference"):
        raise MatrixError(f"{where}: top-level old/new name roles of an audit; a matrix's sides are its [sides.NAME] tables, in order")
    ref_name = file.chosen.get("reference")
    names = tuple(n for n in file.tables if n != ref_name)
    bad = [n for n in names if n in RESERVED]
    if bad:
        raise MatrixError(f"{where}: [sides.{bad[0]}]: {bad[0]!r} names the tables' own rows; give the side another name")
    for n in names:  # a name is a column of the tables and an item of the lists "a, b, c" the reports print
        if not n.strip() or n != n.strip() or "," in n or not n.isprintable():
            raise MatrixError(f"{where}: [sides.{json.dumps(n)}]: a side's name is a column and an item of the lists the report "
                              "prints: give one without a comma, a control character or spaces at its ends, and not empty")
    if not names:
        raise MatrixError(f"{where}: no side besides the reference; a matrix needs at least one [sides.NAME] table")
    base = baseline if baseline is not None else names[0]
    if base not in names:
        raise MatrixError(f"--baseline {base}: no side of that name in {file.path} (sides: {', '.join(names)})")
    specs = {n: file.tables[n] for n in names}
    return MatrixSides(file.path, names, specs, file.tables.get(ref_name) if ref_name else None, base)


@dataclass
class MatrixResult:
    """A finished matrix: ``run_dir``, its ``sides`` (:class:`MatrixSides`), the tables of the
    queries ``matrix`` and ``matrix_faults`` (Arrow), the ``report`` (:class:`replay.report.matrix.
    MatrixReport`: paths written), ``meta`` (``run.json``) and ``seconds`` per step."""

    run_dir: Path
    sides: MatrixSides
    matrix: pa.Table
    faults: pa.Table
    report: Any
    meta: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)


def _with_default(spec: SideSpec) -> SideSpec:
    return spec if spec.serializer is not None else dataclasses.replace(spec, serializer=DEFAULT_SERIALIZER)


def pairs(names: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """The sides two at a time, in order: ``[(a, b), ...]``; ``b`` None for the last of an odd count."""
    return [(names[i], names[i + 1] if i + 1 < len(names) else None) for i in range(0, len(names), 2)]


def pair_config(sides: MatrixSides, a: str, b: str | None, *, chunkings: str | None, replay_timeout: float,
                chat_template: list[str] | None = None, renderer: str | None = None, parser: str | None = None, jobs: int = 1) -> Any:
    """The :class:`replay.runspec.AuditConfig` of one pair: side ``a`` as old, ``b`` as new (the
    built-in side when None), the matrix's reference as reference; the run's shared options.
    Raises ValueError (a :class:`replay.errors.UsageError` for an unknown name) as
    :func:`replay.runspec.build_config` does, naming the option."""
    from replay.runspec import build_config, spec_from_options
    from replay.side import spec_fields

    by_role: dict[str, SideSpec] = {"old": _with_default(sides.specs[a]), "new": _with_default(sides.specs[b]) if b else SideSpec(serializer=DEFAULT_SERIALIZER)}
    if sides.reference is not None:
        by_role["reference"] = sides.reference
    spec = spec_from_options(chat_templates=chat_template, tokenizers=None, chunkings=chunkings, renderer=renderer, date=None,
                             parser=parser, replay_timeout=replay_timeout, jobs=jobs, **spec_fields(by_role))
    return build_config(spec, load=True)


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system, or links refused: a copy
        shutil.copyfile(src, dst)


def merge_pairs(run_dir: Path, work: list[tuple[Path, str, str | None]]) -> dict[str, int]:
    """Join the pairs' ``renders``, ``streams`` and ``calls`` into ``run_dir``'s tables: ``work``
    ``[(pair folder, old side's name, new side's name or None), ...]`` in order. Each pair's
    ``old`` rows become its first side's, ``new`` rows its second's (dropped when None); the
    ``reference`` rows are the first pair's. Returns ``{table: rows written}``. Raises OSError when
    a table cannot be read or written."""
    from replay.tables import TABLES

    written = {}
    for table in SIDE_TABLES:
        parts: list[pa.Table] = []
        for k, (folder, a, b) in enumerate(work):
            path = folder / f"{table}.parquet"
            if not path.is_file():
                continue
            t = pq.read_table(path)
            side = t.column("side")
            names = {"old": a, "new": b, **({"reference": "reference"} if k == 0 else {})}
            keep = pa.array([s in names and names[s] is not None for s in side.to_pylist()], pa.bool_())
            t = t.filter(keep)
            renamed = pa.array([names[s] for s in t.column("side").to_pylist()], t.schema.field("side").type)
            t = t.set_column(t.schema.get_field_index("side"), t.schema.field("side"), renamed)
            parts.append(t.cast(TABLES[table]) if t.schema != TABLES[table] else t)
        out = pa.concat_tables(parts) if parts else pa.Table.from_batches([], schema=TABLES[table])
        tmp = run_dir / f".tmp-{table}.parquet"
        pq.write_table(out, tmp)
        tmp.replace(run_dir / f"{table}.parquet")
        written[table] = out.num_rows
    return written


def matrix_connect(run_dir: str | Path, names: tuple[str, ...] | list[str], baseline: str, settings: Any = None) -> Any:
    """:func:`replay.sql.connect` of ``run_dir`` with the DuckDB variables the matrix queries read
    set: ``matrix_sides`` (``names``, in order) and ``matrix_baseline``. Raises as ``connect``."""
    from replay.matrix_vars import set_matrix_vars
    from replay.sql import connect

    con = connect(run_dir, settings)
    set_matrix_vars(con, names, baseline)
    return con


def _no_stage(name: str, total: int) -> Any:
    from contextlib import nullcontext

    return nullcontext(lambda n: None)


def run_matrix(
    paths: list[Any], out: str | Path, sides: MatrixSides, *, chunkings: str | None = None, replay_timeout: float = 10.0,
    chat_template: list[str] | None = None, renderer: str | None = None, parser: str | None = None, jobs: int = 1,
    capture_format: str | None = None, max_line_bytes: int = 32 << 20, force: bool = False, redact: bool = True,
    stage: Callable[[str, int], Any] | None = None, duckdb_settings: Any = None, html: bool = True,
) -> MatrixResult:
    """Run a matrix (module docstring) of the capture files ``paths`` (as
    :func:`replay.capture.discover` returns them) into the run folder ``out``.

    ``sides``: :func:`matrix_sides`; ``chunkings``, ``replay_timeout`` (seconds per replay),
    ``chat_template``, ``renderer``, ``parser``: the shared options of an audit; ``jobs``: the
    stages' processes; ``redact``: mask message text in the exemplars; ``stage``: progress
    (:data:`replay.runner.progress.StageFn`); ``html``: write ``report.html`` too. Returns a
    :class:`MatrixResult`.

    Raises :class:`replay.runner.runfolder.RunExistsError` when ``out`` holds a run and not ``force``;
    :class:`replay.runner.runfolder.RunInUseError` when another command writes it; ValueError (a
    :class:`replay.errors.UsageError` for a bad name) for a side whose serializer, parser or
    worker cannot be set up, naming the option, before its pair runs. Faults in the data never
    raise: they are rows.
    """
    from replay.capture.files import file_size, input_record
    from replay.report.matrix import write_matrix_report
    from replay.runner.driver import count_exchanges, run_render, run_stream
    from replay.runner.ingest import ingest
    from replay.runner.plan import executor_meta
    from replay.runner.pool import close_pools
    from replay.runner.runfolder import RunFolder, versions
    from replay.sides import close_sides
    from replay.stages.stream import chunking_plan
    from replay.stages.validate import validate_specs
    from replay.sql import run_query

    stage = stage or _no_stage
    run_dir = Path(out)
    folder = RunFolder(run_dir, "replay matrix")
    folder.check()
    seconds: dict[str, float] = {}
    folder.lock()
    with folder:
        folder.refuse_existing(force)
        work_root = run_dir / ".matrix"
        meta: dict[str, Any] = folder.meta
        meta.update({
            "options": {"matrix": {"sides": {n: sides.specs[n].to_json() for n in sides.names}, "order": list(sides.names),
                                   "baseline": sides.baseline, "sides_file": sides.path,
                                   "reference": sides.reference.to_json() if sides.reference is not None else None,
                                   "default_serializer": DEFAULT_SERIALIZER},
                        "chunkings": chunkings, "replay_timeout": replay_timeout, "capture_format": capture_format, "jobs": jobs},
            "versions": versions(),
            "inputs": [input_record(f) for f in paths],
        })
        # every pair's specs resolved and its workers started before any work: a bad side fails
        # here, in one line naming it (the workers are kept for the pair's stages)
        configs: list[Any] = []
        try:
            for a, b in pairs(sides.names):
                try:
                    cfg = pair_config(sides, a, b, chunkings=chunkings, replay_timeout=replay_timeout, chat_template=chat_template,
                                      renderer=renderer, parser=parser, jobs=jobs)
                    configs.append(cfg)
                    validate_specs(cfg)
                except ValueError as exc:
                    raise _renamed(exc, a, b, sides.path) from None
        except BaseException:
            for cfg in configs:
                close_sides(cfg)
            raise
        folder.clear()  # the sides are good: the run --out held (with --force) goes
        shutil.rmtree(work_root, ignore_errors=True)
        try:
            folder.mark("ingest")
            t0 = time.perf_counter()
            with stage("ingest", sum(file_size(f) or 0 for f in paths)) as advance:
                stats = ingest(paths, run_dir, progress=advance, capture_format=capture_format, max_line_bytes=max_line_bytes)
            meta["ingest"] = dataclasses.asdict(stats) if dataclasses.is_dataclass(stats) else dict(stats)
            seconds["ingest"] = time.perf_counter() - t0

            work: list[tuple[Path, str, str | None]] = []
            meta["sides"], meta["chunkings"] = {}, {}
            n = count_exchanges(run_dir)
            for k, ((a, b), cfg) in enumerate(zip(pairs(sides.names), configs)):
                pair_dir = work_root / str(k)
                pair_dir.mkdir(parents=True, exist_ok=True)
                for table in ("exchanges", "tools", "ingest_errors"):
                    if (run_dir / f"{table}.parquet").is_file():
                        _link(run_dir / f"{table}.parquet", pair_dir / f"{table}.parquet")
                label = a if b is None else f"{a}, {b}"
                folder.mark(f"sides {label}")
                t0 = time.perf_counter()
                try:
                    with stage(f"render {label}", n) as advance:
                        run_render(pair_dir, cfg, progress=advance)
                    with stage(f"re-stream {label}", n) as advance:
                        run_stream(pair_dir, cfg, progress=advance)
                finally:
                    close_pools()
                    got = close_sides(cfg)
                side_meta, _ = executor_meta(cfg, got)
                plan = chunking_plan(cfg)
                for role, name in (("old", a), ("new", b)):
                    if name is None:
                        continue
                    meta["chunkings"][name] = plan.get(role)
                    if side_meta and role in side_meta:
                        meta["sides"][name] = side_meta[role]
                seconds[f"sides {label}"] = time.perf_counter() - t0
                work.append((pair_dir, a, b))
        finally:
            for cfg in configs:
                close_sides(cfg)
        folder.mark("report")
        merge_pairs(run_dir, work)
        shutil.rmtree(work_root, ignore_errors=True)

        t0 = time.perf_counter()
        con = matrix_connect(run_dir, sides.names, sides.baseline, duckdb_settings)
        try:
            matrix = run_query(con, "matrix")
            faults = run_query(con, "matrix_faults")
            report = write_matrix_report(run_dir, con, sides.names, sides.baseline, matrix, faults, meta, redact=redact, html=html)
        finally:
            con.close()
        seconds["report"] = time.perf_counter() - t0
        meta["seconds"] = seconds
        folder.finish()
    return MatrixResult(run_dir, sides, matrix, faults, report, meta, seconds)


def rewrite_report(run_dir: str | Path, *, redact: bool = True, duckdb_settings: Any = None) -> Any:
    """Write a matrix run's ``report.md`` and ``report.html`` again from its tables (what ``replay
    report --run RUN`` does for a matrix run), in the order and with the baseline its ``run.json``
    records. Returns the :class:`replay.report.matrix.MatrixReport`. Raises ValueError when
    ``run_dir`` is no matrix run (its run.json records no side order), and as
    :func:`replay.sql.connect` does."""
    from replay.matrix_vars import recorded_order
    from replay.report.matrix import write_matrix_report
    from replay.runner.runfolder import read_meta
    from replay.sql import run_query

    run = Path(run_dir)
    recorded = recorded_order(run)
    if recorded is None:
        raise ValueError(f"{run}: not a replay matrix run (its run.json records no options.matrix order)")
    names, baseline = recorded
    meta = read_meta(run)
    con = matrix_connect(run, names, baseline, duckdb_settings)
    try:
        matrix, faults = run_query(con, "matrix"), run_query(con, "matrix_faults")
        return write_matrix_report(run, con, names, baseline, matrix, faults, meta, redact=redact)
    finally:
        con.close()


def _side_words(message: str, a: str, b: str | None) -> str:
    """A pair's error message with its roles said as the matrix's side names: ``--old-parser X``
    becomes ``[sides.A] parser X`` (``--new`` the pair's second side, B)."""
    import re

    def sub(m: re.Match[str]) -> str:
        name = a if m.group(1) == "old" else b
        where = f"[sides.{name}]" if name is not None else "the built-in partner side"
        return where + (f" {m.group(2).replace('-', '_')}" if m.group(2) else "")

    return re.sub(r"--(old|new)(?:-([a-z][a-z-]*))?\b", sub, message)


def _renamed(exc: ValueError, a: str, b: str | None, path: str) -> ValueError:
    """``exc`` again, same class where its constructor takes one message, its text said with the
    matrix's side names (:func:`_side_words`) and, when it names a side, the sides file ``path``
    first (``--sides FILE [sides.A] python PY: cannot run it``, as the file's own errors read)."""
    text = _side_words(str(exc), a, b)
    if text.startswith("[sides."):
        text = f"--sides {path} {text}"
    try:
        return type(exc)(text)
    except Exception:  # noqa: BLE001 - a class whose constructor takes other arguments
        return UsageError(text) if isinstance(exc, UsageError) else ValueError(text)
