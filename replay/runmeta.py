"""A run folder's metadata: ``run.json`` (read, written, the ``incomplete`` mark of a command that
has not finished), the files that make a run, and the versions recorded in it.

Kept apart from :mod:`replay.audit` (which re-exports every name here) so that ``replay ingest``
imports only this, not the render, stream and report stages with their libraries.
"""

from __future__ import annotations

import json
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from replay.capture.filters import Filters, describe_kept
from replay.tables import TABLES

__all__ = ["RUN_FILES", "clear_run", "existing_run", "filters_meta", "incomplete_stage", "nothing_ingested", "check_out_folder", "mark_incomplete", "read_meta", "versions", "write_meta"]


def versions() -> dict[str, str]:
    """Versions of replay and the libraries whose behaviour the numbers depend on."""
    out = {"python": platform.python_version()}
    for dist in ("replay-audit", "transformers", "tokenizers", "jinja2", "duckdb", "pyarrow", "orjson"):
        try:
            out["replay" if dist == "replay-audit" else dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def write_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    """Write ``run.json`` (UTF-8, indented)."""
    (Path(run_dir) / "run.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")


def read_meta(run_dir: Path) -> dict[str, Any]:
    """Read ``run.json``; an empty dict when the run has none (a run made by ``replay ingest`` alone).
    Raises ValueError naming the file when it is not JSON."""
    p = Path(run_dir) / "run.json"
    try:
        return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else {}
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{p}: not JSON ({exc})") from None


#: The files of a run folder that a new run replaces (:func:`existing_run`, :func:`clear_run`):
#: the tables of :mod:`replay.tables`, ``run.json`` and the reports; plus ``exemplars/*.json``.
RUN_FILES: tuple[str, ...] = (*(f"{name}.parquet" for name in TABLES), "run.json", "report.md", "report.html")


def existing_run(run_dir: str | Path) -> list[str]:
    """The names of :data:`RUN_FILES` present in ``run_dir`` (empty when it holds no run, or does
    not exist): a command that would write a new run there refuses without ``--force``."""
    folder = Path(run_dir)
    return [name for name in RUN_FILES if (folder / name).is_file()] if folder.is_dir() else []


def clear_run(run_dir: str | Path) -> None:
    """Remove the run in ``run_dir``: the files of :data:`RUN_FILES` and ``exemplars/*.json``
    (stale renders or streams of another capture must not join the new exchanges), and the
    temporary files a killed command left while writing one of them (``.tmp-<pid>-<name>``,
    ``.tmp-<name>``: a SIGKILL during ``replay ingest`` left the three tables' worth); other files
    and the folder itself are left."""
    folder = Path(run_dir)
    for name in RUN_FILES:
        (folder / name).unlink(missing_ok=True)
        for tmp in (*folder.glob(f".tmp-*-{name}"), folder / f".tmp-{name}"):
            if tmp.is_file():
                tmp.unlink(missing_ok=True)
    for old in (folder / "exemplars").glob("*.json"):
        old.unlink()


def mark_incomplete(run_dir: str | Path, meta: dict[str, Any], stage: str) -> None:
    """Record in ``run.json`` that ``stage`` (``ingest``, ``render``, ``re-stream``, ``report``)
    of a command writing ``run_dir`` has started and not finished: ``meta["incomplete"] = stage``,
    written at once. The command removes the key and rewrites ``run.json`` when it ends; a run
    stopped midway (Ctrl-C, a kill) keeps it, and :func:`incomplete_stage` lets ``replay query``
    and ``replay report`` refuse to read its tables as a finished run's."""
    meta["incomplete"] = stage
    write_meta(Path(run_dir), meta)


def incomplete_stage(run_dir: str | Path) -> str | None:
    """The stage a command was in when it stopped before finishing (``run.json``
    ``incomplete``, set by :func:`mark_incomplete`), or None for a finished run (or one written
    by an older replay, or without ``run.json``). Raises ValueError when ``run.json`` is not JSON."""
    stage = read_meta(Path(run_dir)).get("incomplete")
    return str(stage) if stage else None


def filters_meta(filters: Filters, stats: Any) -> dict[str, Any]:
    """``run.json`` ``filters``: the options (:meth:`Filters.options`), the exchanges ``kept`` and
    ``seen`` (kept + filtered out), ``filtered_by`` reason, ``no_timestamp`` (those of them dropped
    by ``--since`` / ``--until`` for having no readable timestamp, ``filtered_by["no-ts"]``), and
    the sentence the reports show (:func:`replay.capture.filters.describe_kept`, which names the
    ``no_timestamp`` count when it is not 0)."""
    seen = stats.exchanges + stats.filtered
    opts = filters.options()
    no_ts = stats.filtered_by.get("no-ts", 0)
    return {"options": opts, "kept": stats.exchanges, "seen": seen, "filtered_by": dict(stats.filtered_by),
            "no_timestamp": no_ts, "sentence": describe_kept(opts, stats.exchanges, seen, no_ts)}


def nothing_ingested(stats: dict[str, Any], files: list[str | Path]) -> str | None:
    """Why a run has nothing to audit, or ``None`` when it ingested at least one exchange.

    ``stats``: :class:`replay.capture.ingest.IngestStats` as a dict (``run.json``'s ``ingest``);
    ``files``: the capture files read. Returns one sentence naming the files and what their
    records were (no lines at all, only blank lines, every record an ingest error by reason,
    skipped as not LLM exchanges, dropped by the filters), for the CLI to print before it exits 1:
    an audit of nothing must not pass a CI job on zeros."""
    if stats.get("exchanges"):
        return None
    names = ", ".join(str(f) for f in files) or "(no files)"
    lines, blank = stats.get("lines", 0), stats.get("blank_lines", 0)
    parts = []
    if not lines:
        parts.append("no lines")
    elif blank == lines:
        parts.append(f"only blank lines ({blank:,})")
    else:
        if stats.get("errors"):
            reasons = ", ".join(f"{r}: {n:,}" for r, n in sorted((stats.get("errors_by_reason") or {}).items()))
            parts.append(f"{stats['errors']:,} ingest error{'s' if stats['errors'] != 1 else ''} ({reasons}; "
                         "`replay query ingest_errors --run RUN` lists them by file and line)")
        if stats.get("skipped"):
            parts.append(f"{stats['skipped']:,} skipped (not an LLM exchange)")
        if stats.get("filtered"):
            parts.append(f"{stats['filtered']:,} dropped by the filters")
        if blank:
            parts.append(f"{blank:,} blank")
    return f"no exchange in {names}: {'; '.join(parts)}"


def check_out_folder(run_dir: str | Path) -> None:
    """Raise ValueError naming ``run_dir`` (a command's ``--out``) when it cannot be a run folder:
    it, or the nearest part of its path that exists, is a file. Called before anything is read or
    written, so that the command fails in one line instead of ``mkdir``'s traceback."""
    folder = Path(run_dir)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder}: exists and is not a folder")
    for parent in folder.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"--out {folder}: {parent} is a file, not a folder")
            break
