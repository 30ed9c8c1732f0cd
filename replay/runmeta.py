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

__all__ = ["RUN_FILES", "clear_run", "existing_run", "filters_meta", "incomplete_stage", "mark_incomplete", "read_meta", "versions", "write_meta"]


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
    (stale renders or streams of another capture must not join the new exchanges); other files
    and the folder itself are left."""
    folder = Path(run_dir)
    for name in RUN_FILES:
        (folder / name).unlink(missing_ok=True)
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
    ``seen`` (kept + filtered out), ``filtered_by`` reason, and the sentence the reports show
    (:func:`replay.capture.filters.describe_kept`)."""
    seen = stats.exchanges + stats.filtered
    opts = filters.options()
    return {"options": opts, "kept": stats.exchanges, "seen": seen, "filtered_by": dict(stats.filtered_by),
            "sentence": describe_kept(opts, stats.exchanges, seen)}
