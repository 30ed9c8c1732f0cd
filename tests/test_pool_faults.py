"""Faults of the ``--jobs N`` pool (:mod:`replay.runner.pool`) met from the outside: a pool process that
dies while the caller of :func:`replay.runner.pool.map_batches` is busy with a result it was given."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from procs import running, signal_when, wait_for


def test_a_process_that_dies_while_the_caller_holds_a_result_is_retried_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool breaks while the consumer of ``map_batches`` is still writing the first result (as
    ingest writes Parquet between results): the next ``submit`` used to raise ``BrokenProcessPool``
    out of ``replay ingest --jobs 2`` (a traceback, no tables) when a pool process was SIGKILLed.
    Now every batch still gets its result: the killer alone through ``on_failed``, the others
    computed in the next pool, each exactly once."""
    from replay.capture.ingest import IngestSpec
    from replay.runner.pool import PoolStats, close_pools, map_batches

    (tmp_path / "pool_killer.py").write_text(
        "import os, time\n"
        "def work(batch, spec):\n"
        "    if batch == 'kill':\n"
        "        time.sleep(0.3)\n"
        "        os._exit(9)\n"
        "    return {'value': batch}\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned pool processes import it too
    import pool_killer

    batches = [(0, "a"), (1, "kill"), (2, "b"), (3, "c"), (4, "d"), (5, "e"), (6, "f")]
    stats = PoolStats()
    got = {}
    try:
        for key, _batch, result in map_batches(pool_killer.work, iter(batches), IngestSpec(), 2,
                                               lambda k, b, msg: {"failed": msg}, stats):
            got[key] = result
            if len(got) == 1:
                time.sleep(1.5)  # the killer dies meanwhile; the pool is broken before the next submit
    finally:
        close_pools()
        sys.modules.pop("pool_killer", None)
    assert sorted(got) == list(range(7))
    assert {k: v for k, v in got.items() if k != 1} == {k: {"value": b} for k, b in batches if k != 1}
    assert got[1]["failed"].startswith("WorkerError: the pool process died on this batch")
    assert stats.restarts >= 1 and stats.failed == 1


def _slow_ingest(tmp_path: Path) -> tuple[list[str], Path, Path, Path]:
    """A ``replay ingest --jobs 2`` command line whose pool function records its pid in ``pids/``
    and then sleeps 2 s an item before parsing it; its capture, --out and pids folder."""
    import orjson

    pids = tmp_path / "pids"
    pids.mkdir()
    (tmp_path / "slow_ingest.py").write_text(
        "import os, time\n"
        "from replay.runner.ingest import ingest_shared\n"
        f"PIDS = {str(pids)!r}\n"
        "def slow(item, spec):\n"
        "    open(os.path.join(PIDS, str(os.getpid())), 'w').close()\n"
        "    only = os.environ.get('SLOW_ONLY', '').encode()  # sleep on the items holding it (all: unset)\n"
        "    if any(only in e[3] for e in item.line_batch().entries if e[0] == 'line'):\n"
        "        time.sleep(float(os.environ.get('SLOW_SECONDS', '2')))\n"
        "    return ingest_shared(item, spec)\n")
    (tmp_path / "run_cli.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "if __name__ == '__main__':  # the spawned pool processes import this file too\n"
        "    import slow_ingest\n"
        "    import replay.runner.ingest\n"
        "    m = sys.modules['replay.runner.ingest']\n"
        "    m._POOL_FUNCTION = slow_ingest.slow\n"
        "    m._POOL_ITEM_BYTES = 1\n"
        "    from replay.cli import app\n"
        "    sys.argv = ['replay'] + sys.argv[1:]\n"
        "    sys.exit(app())\n")
    cap = tmp_path / "cap.jsonl"
    rec = {"route": "chat.completions", "model": "m", "request": {"messages": [{"role": "user", "content": "hi"}]}}
    cap.write_bytes(b"".join(orjson.dumps({**rec, "id": f"x{i}"}) + b"\n" for i in range(8)))
    out = tmp_path / "run"
    return [sys.executable, str(tmp_path / "run_cli.py"), "ingest", str(cap), "--out", str(out), "--jobs", "2", "-q"], cap, out, pids


def _signal_slow_ingest(tmp_path: Path, sig: int, end_within: float, *, started: int = 1, env: dict | None = None,
                        group: bool = False) -> tuple[Any, Path, bytes]:
    """Start :func:`_slow_ingest`'s command (with ``env``; in a session of its own when
    ``group``), send it ``sig`` once ``started`` pool processes work (to its whole process group
    when ``group``, as Ctrl-C in a terminal does), wait for it; then assert its pool processes
    end within ``end_within`` s (SIGKILLing what is left either way). Returns the finished
    process, its --out and its stderr."""
    import subprocess

    cmd, _cap, out, pids = _slow_ingest(tmp_path)
    with running(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=group, env=env) as proc:
        # settle, with group: the other pool processes have done their quick items and wait for work
        _, stderr = signal_when(proc, lambda: len(list(pids.iterdir())) >= started, sig, never="the pool never started",
                                settle=1.5 if group else 0.0, group=group)
    workers = [int(p.name) for p in pids.iterdir()]
    try:
        assert wait_for(lambda: not any(_alive(w) for w in workers), end_within, step=0.1), f"pool processes still running: {workers}"
    finally:
        _end(workers)
    return proc, out, stderr


def _end(pids: list[int]) -> None:
    """SIGKILL what is left of ``pids`` (a failed test leaves no process behind)."""
    import os
    import signal

    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not running
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


@pytest.mark.skipif(sys.platform != "linux", reason="signals and /proc as on Linux")
def test_sigterm_ends_a_parallel_ingest_as_ctrl_c_does(tmp_path: Path) -> None:
    """``kill PID`` (SIGTERM) of ``replay ingest --jobs 2`` while its pool works: the pool
    processes end, no work folder is left in /dev/shm nor a temporary table in the run folder,
    and run.json says the ingest is incomplete (``replay query`` refuses it). With SIGTERM's
    default action the parent died at once: its two pool processes stayed, waiting for ever,
    and so did ``/dev/shm/replay-ingest-PID-*`` and ``RUN/.tmp-PID-*.parquet``."""
    import signal

    from sides_data import invoke

    proc, out, stderr = _signal_slow_ingest(tmp_path, signal.SIGTERM, 10)
    assert proc.returncode == 130
    assert stderr.decode().strip() == (f"error: interrupted during ingest: {out} is incomplete (run.json says so; "
                                       "replay query and replay report refuse it); run the ingest again with --force")
    assert not list(Path("/dev/shm").glob(f"replay-ingest-{proc.pid}-*"))
    assert not [p.name for p in out.iterdir() if p.name.startswith((".tmp-", "replay-ingest-"))]
    result = invoke("query", "summary", "--run", out)
    assert result.exit_code != 0 and "stopped during ingest" in result.stderr, result.stderr
    # what to do, without the "run `replay audit` again (or finish it: replay audit)" it said for
    # a `replay ingest` run, whose rerun without --force is refused
    assert result.stderr.strip().endswith("its tables are incomplete; run the command again: `replay audit` resumes; "
                                          "`replay ingest` needs --force"), result.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="signals and /proc as on Linux")
def test_pool_processes_end_when_their_parent_is_killed(tmp_path: Path) -> None:
    """SIGKILL of ``replay ingest --jobs 2`` (nothing of it runs again): its pool processes notice
    within about a second that their parent is gone and exit, instead of waiting on their call
    queue for ever; the next parallel ingest removes the work folder the killed one left in
    /dev/shm."""
    import signal

    from replay.runner.ingest import _remove_stale_work_dirs, _shm_dir

    proc, out, _stderr = _signal_slow_ingest(tmp_path, signal.SIGKILL, 15)
    left = list(_shm_dir(out).glob(f"replay-ingest-{proc.pid}-*"))
    assert left, "the killed ingest left no work folder: nothing to test"
    _remove_stale_work_dirs(_shm_dir(out))  # (a parallel test's ingest may have removed them first)
    assert not any(p.exists() for p in left)


def test_only_work_folders_of_dead_processes_are_removed(tmp_path: Path) -> None:
    """:func:`_remove_stale_work_dirs` removes ``replay-ingest-<pid>-*`` folders of pids that no
    longer exist, and keeps those of live processes, its own, and names of another shape."""
    import os
    import subprocess

    from replay.runner.ingest import _remove_stale_work_dirs

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    names = [f"replay-ingest-{dead.pid}-abc", f"replay-ingest-{os.getppid()}-def", f"replay-ingest-{os.getpid()}-ghi",
             "replay-ingest-x-1", "other-1-2"]
    for n in names:
        (tmp_path / n).mkdir()
        (tmp_path / n / "0-0.lines").write_bytes(b"x")
    assert _remove_stale_work_dirs(tmp_path) == [tmp_path / names[0]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[1:])


def test_force_removes_the_temporary_tables_a_killed_ingest_left(tmp_path: Path) -> None:
    """A ``replay ingest`` killed while writing leaves ``RUN/.tmp-<pid>-<table>.parquet``; the
    rerun with ``--force`` replaces the run and those with it (they were kept for ever, each as
    big as its table). A file of another name is left."""
    import orjson

    from sides_data import invoke

    cap = tmp_path / "cap.jsonl"
    cap.write_bytes(orjson.dumps({"id": "a", "route": "chat.completions", "model": "m",
                                  "request": {"messages": [{"role": "user", "content": "hi"}]}}) + b"\n")
    out = tmp_path / "run"
    assert invoke("ingest", cap, "--out", out, "-q").exit_code == 0
    left = [out / ".tmp-99999-exchanges.parquet", out / ".tmp-99999-tools.parquet", out / ".tmp-run.json"]
    for p in left:
        p.write_bytes(b"partial")
    (out / "notes.txt").write_text("mine")
    result = invoke("ingest", cap, "--out", out, "-q", "--force")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["exchanges.parquet", "ingest_errors.parquet", "notes.txt", "run.json", "tools.parquet"]


def test_the_work_files_go_to_the_run_folder_when_dev_shm_is_too_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`_shm_dir`: ``/dev/shm`` only when writable with the bytes a parallel ingest may hold
    there free (:func:`_shm_need`), else the run folder."""
    import os

    from replay.runner.ingest import _shm_dir, _shm_need

    shm, run = tmp_path / "shm", tmp_path / "run"
    shm.mkdir()
    need = _shm_need(2)
    assert need >= 2 * 2 * (4 << 20)
    real = os.statvfs

    class Small:
        f_bavail, f_frsize = (need - 1) // 4096, 4096

    assert _shm_dir(run, need, shm) == shm  # tmp_path's file system has room
    monkeypatch.setattr(os, "statvfs", lambda p: Small() if Path(p) == shm else real(p))
    assert _shm_dir(run, need, shm) == run
    assert _shm_dir(run, 0, shm) == shm
    assert _shm_dir(run, 0, tmp_path / "missing") == run


def _private_shm(tmp_path: Path, opts: str, *args: str):
    """``python -m replay ARGS`` with a tmpfs of mount options ``opts`` on /dev/shm, in a mount
    namespace of its own (``unshare -m``); skips where that is not permitted."""
    import shutil
    import subprocess

    if sys.platform != "linux" or shutil.which("unshare") is None:
        pytest.skip("needs Linux and unshare")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1M tmpfs /dev/shm"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a private /dev/shm here: {probe.stderr.decode(errors='replace').strip()}")
    script = 'mount -t tmpfs -o "$1" tmpfs /dev/shm || exit 99; shift; exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", opts, sys.executable, "-m", "replay", *args],
                          capture_output=True, text=True, timeout=300)


def _capture(tmp_path: Path, n: int) -> Path:
    import orjson

    cap = tmp_path / "cap.jsonl"
    rec = {"route": "chat.completions", "model": "m",
           "request": {"messages": [{"role": "user", "content": "x" * 2000}],
                       "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}}
    cap.write_bytes(b"".join(orjson.dumps({**rec, "id": f"x{i}"}) + b"\n" for i in range(n)))
    return cap


def test_a_parallel_ingest_with_a_tiny_dev_shm_writes_the_same_tables(tmp_path: Path) -> None:
    """``replay ingest --jobs 2`` where /dev/shm is a 1 MiB tmpfs (a container's is often 64 MiB):
    the work files go to the run folder, the tables are --jobs 1's, nothing is left behind. It
    raised ``OSError: [Errno 28] No space left on device`` (a traceback) writing an item's lines."""
    cap = _capture(tmp_path, 6000)  # ~12 MiB: several 4 MiB items
    r2 = _private_shm(tmp_path, "size=1M", "ingest", str(cap), "--out", str(tmp_path / "j2"), "--jobs", "2", "-q")
    assert r2.returncode == 0, r2.stderr[-2000:]
    r1 = _private_shm(tmp_path, "size=1M", "ingest", str(cap), "--out", str(tmp_path / "j1"), "--jobs", "1", "-q")
    assert r1.returncode == 0, r1.stderr[-2000:]
    for name in ("exchanges.parquet", "tools.parquet", "ingest_errors.parquet"):
        assert (tmp_path / "j1" / name).read_bytes() == (tmp_path / "j2" / name).read_bytes(), name
    assert sorted(p.name for p in (tmp_path / "j2").iterdir()) == ["exchanges.parquet", "ingest_errors.parquet", "run.json", "tools.parquet"]


def test_a_read_only_dev_shm_is_a_one_line_error_naming_jobs(tmp_path: Path) -> None:
    """multiprocessing's semaphores need a writable /dev/shm: with a read-only one, ``replay ingest
    --jobs 2`` and ``replay audit --jobs 2`` end with one line saying so and what to do (it was a
    traceback ending in ``OSError: [Errno 30] Read-only file system`` for ingest, and that bare
    sentence for audit)."""
    cap = _capture(tmp_path, 3)
    for cmd in ("ingest", "audit"):
        more = ("--batch-rows", "1") if cmd == "audit" else ()  # (an audit of 3 exchanges in one batch runs here)
        r = _private_shm(tmp_path, "size=1M,ro", cmd, str(cap), "--out", str(tmp_path / cmd), "--jobs", "2", *more, "-q")
        assert r.returncode == 1, (cmd, r.stderr[-2000:])
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), (cmd, r.stderr[-2000:])
        assert "(--jobs 2)" in lines[0] and "writable /dev/shm" in lines[0] and "run with --jobs 1" in lines[0]


@pytest.mark.skipif(sys.platform != "linux", reason="signals and /proc as on Linux")
def test_ctrl_c_of_a_parallel_ingest_prints_no_traceback_from_the_pool(tmp_path: Path) -> None:
    """Ctrl-C in a terminal (SIGINT to the whole process group) while one pool process works and
    the other waits for work: exit 130, the pool processes end, nothing in /dev/shm, and no
    traceback on stderr (each idle pool process printed ``KeyboardInterrupt`` from its queue read)."""
    import os
    import signal

    env = {**os.environ, "SLOW_ONLY": '"x0"', "SLOW_SECONDS": "30"}  # one process on x0's item, the other done
    proc, _out, stderr = _signal_slow_ingest(tmp_path, signal.SIGINT, 10, started=2, env=env, group=True)
    assert proc.returncode == 130
    assert "Traceback" not in stderr.decode(errors="replace"), stderr.decode(errors="replace")[-3000:]
    assert not list(Path("/dev/shm").glob(f"replay-ingest-{proc.pid}-*"))
