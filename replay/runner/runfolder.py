"""The run folder: :class:`RunFolder`, the one object every command that writes a run uses to
open it (check the path, take its lock, refuse or clear an older run), mark it incomplete stage by
stage, resume an interrupted audit, finish it (write ``run.json``) and describe it; and the helpers
it is made of: ``run.json`` (read, written, the ``incomplete`` mark of a command that has not
finished), the files that make a run, the lock, and the versions recorded in it.

Kept apart from :mod:`replay.audit` (which re-exports the names ``replay`` users import from it)
so that ``replay ingest`` imports only this, not the render, stream and report stages with their
libraries. The rules come from issue #20 (a run folder under faults) and issue #22 (one lifecycle
instead of three copies).
"""

from __future__ import annotations

import json
import os
import platform
import re
from importlib import metadata
from pathlib import Path
from typing import Any

from replay.capture.filters import Filters, describe_kept
from replay.tables import TABLES

__all__ = ["RunFolder", "RunExistsError", "prepare_out", "LOCK_FILE", "RUN_FILES", "RunInUseError", "RunLock", "run_writer", "remove_stale_temporaries", "inputs_changed", "changed_inputs_message", "clear_run", "existing_run", "filters_meta", "incomplete_stage", "nothing_ingested", "check_out_folder", "mark_incomplete", "read_meta", "versions", "write_meta"]


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


def inputs_changed(recorded: list[dict[str, Any]], files: list[str | Path]) -> list[str]:
    """How the capture files ``files`` of this command differ from ``recorded`` (``run.json``
    ``inputs`` of the run in the folder, :func:`replay.capture.files.input_record`): one phrase per file,
    ``"a.jsonl modified (1,200 -> 1,350 bytes)"`` (or ``(same size, modified since the run)``
    when only ``mtime_ns`` differs; a run written before it was recorded compares sizes only), ``"b.jsonl added"``, ``"c.jsonl
    removed"``, in ``files`` order then the removed. Paths are compared resolved (a relative
    recorded path against the current folder). Empty when they are the same."""
    from replay.capture.files import input_record
    from replay.capture.storage import is_uri

    def key(path: Any) -> str:
        text = str(getattr(path, "uri", path))
        return text if is_uri(text) else os.path.realpath(text)

    before = {key(r["path"]): r for r in recorded if isinstance(r, dict) and r.get("path")}
    now = {key(f): input_record(f) for f in files}
    out = []
    for k, cur in now.items():
        old = before.get(k)
        if old is None:
            out.append(f"{cur['path']} added")
        elif old.get("bytes") != cur["bytes"]:
            out.append(f"{cur['path']} modified ({_sizes(old.get('bytes'), cur['bytes'])})")
        elif old.get("etag") is not None and old["etag"] != cur.get("etag"):
            out.append(f"{cur['path']} modified (same size, another ETag)")
        elif old.get("mtime_ns") is not None and old["mtime_ns"] != cur.get("mtime_ns"):
            out.append(f"{cur['path']} modified (same size, modified since the run)")
    out += [f"{r['path']} removed" for k, r in before.items() if k not in now]
    return out


def _sizes(before: Any, now: Any) -> str:
    """``"1,200 -> 1,350 bytes"``; a size that could not be read is ``unreadable``."""
    if isinstance(before, int) and isinstance(now, int):
        return f"{before:,} -> {now:,} bytes"
    return " -> ".join(f"{n:,} bytes" if isinstance(n, int) else "unreadable" for n in (before, now))


def changed_inputs_message(run_dir: str | Path, files: list[str | Path]) -> str | None:
    """The sentence for a command refused because ``run_dir`` holds a run of other captures
    (:func:`inputs_changed` against its ``run.json`` ``inputs``): which files were added, removed
    or modified, and what to do (``--force`` to replace the run, or another ``--out``). None when
    the run records the same files, or records none (no ``run.json``, or one that is not JSON)."""
    try:
        recorded = read_meta(Path(run_dir)).get("inputs")
    except ValueError:
        return None
    if not isinstance(recorded, list):
        return None
    changes = inputs_changed(recorded, files)
    if not changes:
        return None
    shown = "; ".join(changes[:5]) + (f"; and {len(changes) - 5:,} more" if len(changes) > 5 else "")
    return (f"--out {run_dir} holds a run of other captures than these ({shown}); give --force to replace it "
            "with a run of these captures, or another --out")


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


#: The lock file of a run folder (:class:`RunLock`): ``RUN/.replay.lock``, holding the pid and
#: command of the process that holds it.
LOCK_FILE = ".replay.lock"


class RunInUseError(ValueError):
    """Another process holds the run folder's lock (:class:`RunLock`): it is writing that run."""


class RunLock:
    """An exclusive OS lock on a run folder, held by the one command that writes it (``replay
    audit``, ``ingest``, ``render``, ``stream``, ``report``): ``fcntl.flock`` on
    ``RUN/`` :data:`LOCK_FILE`, so the kernel releases it when the process ends in any way
    (SIGKILL included); a lock file a killed process left is taken over.

    ``RunLock(run_dir, command)`` acquires it at once, making the folder (and its parents) when
    it does not exist; ``command``: what to tell another command that finds it held (``"replay
    audit"``). Raises :class:`RunInUseError` naming the folder and the holder's pid and command
    (as its lock file says) when another process holds it, having touched nothing else; OSError
    when the folder or lock file cannot be made. Once it holds the lock it removes the
    temporary files a killed writer left (:func:`remove_stale_temporaries`). :meth:`release`
    (or leaving the ``with`` block) removes the lock file, and the folder when this lock made it
    and it is left empty. Linux and macOS (``fcntl``); the lock's open file is not inherited by
    the pool's spawned processes, so it ends with this process."""

    def __init__(self, run_dir: str | Path, command: str) -> None:
        import fcntl

        self.folder = Path(run_dir)
        self.path = self.folder / LOCK_FILE
        self.made = not self.folder.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 4096).decode("utf-8", "replace").strip()
                os.close(fd)
                raise RunInUseError(
                    f"{self.folder} is in use: {holder or 'another replay command'} is writing it; "
                    "wait for that command to end, or give another run folder"
                ) from None
            except BaseException:
                os.close(fd)
                raise
            try:  # the holder before may have removed the file between our open and flock
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        self.fd: int | None = fd
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} ({command})\n".encode())
        try:
            remove_stale_temporaries(self.folder)  # a killed writer's, before this command reads or resumes anything
        except OSError:  # one it may not remove: left, as before
            pass

    def release(self) -> None:
        """Remove the temporary files this command left (an interrupt during a write:
        :func:`remove_stale_temporaries`), the lock file, and release the lock (a second call
        does nothing); remove the folder too when this lock made it and nothing else is in it
        (a command that failed before writing leaves no empty folder)."""
        if self.fd is None:
            return
        try:
            remove_stale_temporaries(self.folder)  # this command's, left by an interrupt
        except OSError:
            pass
        self.path.unlink(missing_ok=True)  # while still held: a waiting opener sees another inode
        os.close(self.fd)
        self.fd = None
        if self.made:
            try:
                self.folder.rmdir()
            except OSError:  # not empty: the command wrote its run
                pass

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.release()


def run_writer(run_dir: str | Path) -> str | None:
    """The pid and command of a live process holding ``run_dir``'s :class:`RunLock` (``"pid 123
    (replay audit)"``, as its lock file says), or None when there is no lock file or its process
    is gone or is this one. Reads only (it takes no lock), for ``replay query`` and ``replay
    show`` to tell a run being written from one a command left incomplete; a reused pid can make
    it name a process that is not writing."""
    try:
        holder = (Path(run_dir) / LOCK_FILE).read_text(encoding="utf-8", errors="replace").strip()
        pid = int(holder.split()[1])
    except (OSError, ValueError, IndexError):  # no file, empty or not ours
        return None
    return holder if pid != os.getpid() and _alive(pid) else None


_TMP_PID = re.compile(r"\.tmp-(\d+)-(.+)")


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's included)."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def remove_stale_temporaries(run_dir: str | Path) -> list[Path]:
    """Remove the temporary files that no live process is writing in the run folder ``run_dir``:
    ``.tmp-<pid>-<name>`` (:func:`replay.runner.driver.write_atomic`, :func:`replay.runner.driver.merge_parts`,
    ingest's tables, the stages' markers) whose pid is this process or no longer exists, and
    ``.tmp-<name>`` (``.parts/.tmp-audit.json``); in ``RUN/`` only those of :data:`RUN_FILES`,
    in ``RUN/.parts/`` and its table folders every one. Called by :class:`RunLock` once it holds
    the lock (only its holder writes these, so a dead pid's file is a killed writer's: a
    ``kill -9`` during ingest left ``.tmp-<pid>-exchanges.parquet`` through the resumed audit)
    and when it releases it. Files of another live pid (a killed writer's pool process still
    ending) are kept. Returns the files removed; raises OSError for one it may not remove, nothing
    for one already gone."""
    folder = Path(run_dir)
    parts = folder / ".parts"
    candidates = [p for p in folder.glob(".tmp-*") if _tmp_tail(p.name) in RUN_FILES]
    if parts.is_dir():
        candidates += [*parts.glob(".tmp-*"), *parts.glob("*/.tmp-*")]
    removed = []
    for path in candidates:
        m = _TMP_PID.fullmatch(path.name)
        if m and int(m.group(1)) != os.getpid() and _alive(int(m.group(1))):
            continue
        if path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _tmp_tail(name: str) -> str:
    """The file a temporary name stands for: ``.tmp-123-renders.parquet``, ``.tmp-run.json`` ->
    ``renders.parquet``, ``run.json``."""
    m = _TMP_PID.fullmatch(name)
    return m.group(2) if m else name[len(".tmp-"):]


class RunExistsError(ValueError):
    """``--out`` holds a run (or another audit's unfinished parts) and ``--force`` was not given."""


def _state_path(run_dir: Path) -> Path:
    """``RUN/.parts/audit.json``: an interrupted audit's state (fingerprint, ingest statistics)."""
    return Path(run_dir) / ".parts" / "audit.json"


def _write_state(run_dir: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to :func:`_state_path` atomically (a temporary name, then ``replace``)."""
    path = _state_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_text(json.dumps(state, default=str), encoding="utf-8")
    tmp.replace(path)


def prepare_out(run_dir: str | Path, fingerprint: str, force: bool, files: list[Path] | None = None) -> dict[str, Any]:
    """Decide what an audit does with its ``--out`` (the one rule for audit, render and stream
    outputs; ``replay ingest`` uses :meth:`RunFolder.refuse_existing`). ``files``: the audit's
    capture files, to say in the refusal which of them differ from the run's ``run.json``
    ``inputs`` (:func:`changed_inputs_message`), or that only the options
    differ from an interrupted audit's. Returns the audit's state:

    - an empty or new folder: a fresh state;
    - an interrupted audit (``RUN/.parts/audit.json``) with the same ``fingerprint``
      (:func:`replay.audit.audit_fingerprint`) and no ``force``: its state, to resume (``ingest`` holds the
      ingest statistics when ingest had finished; the stages keep their part files);
    - ``force``: the old run is removed (:func:`clear_run` and ``RUN/.parts``), a fresh state;
    - otherwise (a finished run, or another audit's parts): raises :class:`RunExistsError`.
    """
    import shutil

    folder = Path(run_dir)
    held = existing_run(folder)
    parts = folder / ".parts"
    if not force:
        try:
            state = json.loads(_state_path(folder).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = None
        if state is not None and state.get("fingerprint") == fingerprint:
            return {**state, "resumed": True}
        if held or parts.is_dir():
            changed = changed_inputs_message(folder, files) if files is not None else None
            if changed:
                raise RunExistsError(changed)
            if state is not None and files is not None and held:
                raise RunExistsError(
                    f"--out {folder} holds an interrupted audit of these captures with other options (run.json options): "
                    "run it again with those options to resume it, give --force to replace it, or another --out"
                )
            what = ", ".join(held) if held else "the parts of another, unfinished audit"
            raise RunExistsError(
                f"--out {folder} already holds a run ({what}); give --force to replace it, or another --out "
                "(an interrupted audit of the same captures and options resumes without --force)"
            )
    else:
        clear_run(folder)
        shutil.rmtree(parts, ignore_errors=True)
    return {"fingerprint": fingerprint, "ingest": None}


class RunFolder:
    """One run folder through one command's lifecycle: the only place ``replay audit``,
    ``ingest``, ``render`` and ``stream`` open, mark, resume, finish and describe a run.

    ``RunFolder(path, command)``: ``path`` the run folder (``--out`` / ``--run``), ``command``
    what the lock file names as its writer (``"replay audit"``). Nothing is touched until a
    method is called; :attr:`meta` is the ``run.json`` being written (a dict, filled by the
    command). Lifecycle, in order:

    - open: :meth:`check` (ValueError for a path that cannot be a folder), :meth:`lock`
      (:class:`RunInUseError` while another command writes it, OSError when it cannot be made);
      then :meth:`refuse_existing` (``replay ingest``: :class:`RunExistsError` for a run there
      without ``force``), or :meth:`prepare` (``replay audit``: resume an interrupted audit of
      the same fingerprint, else refuse or clear, :func:`prepare_out`) and :meth:`start`;
    - :meth:`mark` each stage as it begins (``run.json`` ``incomplete``);
    - :meth:`finish`: ``run.json`` without the mark, the resume state removed;
    - :meth:`release` (or leaving the ``with`` block): the lock given back.

    Describe: :meth:`read_meta`, :meth:`incomplete_stage`, :meth:`writer`.
    """

    def __init__(self, path: str | Path, command: str) -> None:
        self.path = Path(path)
        self.command = command
        self.meta: dict[str, Any] = {}
        self._lock: RunLock | None = None

    # --- open -------------------------------------------------------------------------------

    def check(self) -> None:
        """Raise ValueError naming the folder when it cannot be a run folder (:func:`check_out_folder`)."""
        check_out_folder(self.path)

    def lock(self, *, create: bool = True) -> bool:
        """Take the folder's :class:`RunLock` for :attr:`command`, held until :meth:`release`.
        ``create`` False: a folder that does not exist is not made and not locked (returns
        False; the command then fails as on a folder that is not a run). Returns True once held.
        Raises :class:`RunInUseError` while another process holds it, OSError when the folder or
        its lock file cannot be made."""
        if not create and not self.path.is_dir():
            return False
        self._lock = RunLock(self.path, self.command)
        return True

    def release(self) -> None:
        """Give the lock back (:meth:`RunLock.release`); nothing when not held."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> "RunFolder":
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.release()

    def held(self) -> list[str]:
        """The run files the folder holds (:func:`existing_run`)."""
        return existing_run(self.path)

    def refuse_existing(self, force: bool, changed: Any = None) -> list[str]:
        """For a command that replaces a run outright (``replay ingest``): the run files held
        (:meth:`held`); raises :class:`RunExistsError` when there are some and not ``force``,
        with ``changed()`` (a callable returning :func:`changed_inputs_message`'s sentence or
        None) as the message when it has one. The caller clears with :meth:`clear` once its
        inputs are known good."""
        held = self.held()
        if held and not force:
            why = changed() if changed is not None else None
            raise RunExistsError(why or f"--out {self.path} already holds a run ({', '.join(held)}); give --force to replace it, or another --out")
        return held

    def prepare(self, fingerprint: str, force: bool, files: list[Path] | None = None) -> dict[str, Any]:
        """The audit's state for this folder (:func:`prepare_out`: resume, refuse or clear)."""
        return prepare_out(self.path, fingerprint, force, files)

    def start(self, state: dict[str, Any] | None) -> tuple[dict[str, Any], bool]:
        """Make the folder and, unless ``state`` resumes an interrupted audit
        (:meth:`prepare`'s ``resumed``), clear any older run in it (a previous run's renders or
        streams must never join this run's exchanges). Returns ``(state without "resumed",
        resumed)``."""
        self.path.mkdir(parents=True, exist_ok=True)
        state = dict(state or {"fingerprint": None, "ingest": None})
        resumed = bool(state.pop("resumed", False))
        if not resumed:
            self.clear()
        return state, resumed

    def clear(self) -> None:
        """Remove the run the folder holds (:func:`clear_run`) and make the folder."""
        clear_run(self.path)
        self.path.mkdir(parents=True, exist_ok=True)

    def save_state(self, state: dict[str, Any]) -> None:
        """Record the audit's resume state (``RUN/.parts/audit.json``): from here an interrupted
        audit of the same fingerprint resumes."""
        _write_state(self.path, state)

    # --- marks --------------------------------------------------------------------------------

    def mark(self, stage: str) -> None:
        """Record in ``run.json`` that ``stage`` has begun and not ended (:func:`mark_incomplete`
        of :attr:`meta`)."""
        mark_incomplete(self.path, self.meta, stage)

    def finish(self, *, audit: bool = False) -> None:
        """Write :attr:`meta` as ``run.json`` without the ``incomplete`` mark: the run is
        complete. ``audit`` (``replay audit``, which alone resumes): also remove the audit's
        resume state and the ``.parts`` folder when empty."""
        self.meta.pop("incomplete", None)
        write_meta(self.path, self.meta)
        if not audit:
            return
        _state_path(self.path).unlink(missing_ok=True)
        try:
            (self.path / ".parts").rmdir()
        except OSError:
            pass

    # --- describe -----------------------------------------------------------------------------

    def read_meta(self) -> dict[str, Any]:
        """``run.json`` (:func:`read_meta`; ValueError when it is not JSON); also kept as :attr:`meta`."""
        self.meta = read_meta(self.path)
        return self.meta

    def incomplete_stage(self) -> str | None:
        """The stage a command stopped in (:func:`incomplete_stage`), None for a finished run."""
        return incomplete_stage(self.path)

    def writer(self) -> str | None:
        """The live process writing the folder, as its lock file names it (:func:`run_writer`)."""
        return run_writer(self.path)
