"""The run folder under faults (issue #20): a Ctrl-C or SIGTERM during the report, two commands
on one ``--out``, the temporary files of a killed run, a rerun after the captures changed, and an
audit interrupted in a folder holding an older run (no table of the old run read as complete)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from procs import running, signal_when, wait_for
from replay.audit import audit
from replay.cli import app
from replay.runspec import AuditConfig
from replay.render.json_tools import JsonToolsRenderer
from sides_data import SAMPLES, invoke

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="signals and flock as on Linux")
AGENT = SAMPLES / "coding-agent.jsonl"
runner = CliRunner()


def _wrapper(tmp_path: Path, patch: str) -> Path:
    """A script running the ``replay`` CLI (``python SCRIPT ARGS...``) after ``patch`` (Python
    source, run in the main process only: the spawned pool processes import the script too)."""
    script = tmp_path / "run_cli.py"
    script.write_text(
        "import sys, time\n"
        "from pathlib import Path\n"
        "if __name__ == '__main__':\n"
        + "".join(f"    {line}\n" for line in patch.splitlines())
        + "    from replay.cli import app\n"
        "    sys.argv = ['replay'] + sys.argv[1:]\n"
        "    sys.exit(app())\n")
    return script


#: The report's queries begin with a DuckDB query that runs until interrupted (a sum over 10^11
#: rows), after touching MARK: a signal then arrives while DuckDB runs a query, as a Ctrl-C
#: during a large run's report does.
SLOW_REPORT = (
    "import replay.audit\n"
    "queries = replay.audit.run_report_queries\n"
    "def slow(con):\n"
    "    Path({mark!r}).touch()\n"
    "    con.execute('SELECT sum(hash(x)) FROM range(100000000000) t(x)').fetchall()\n"
    "    return queries(con)\n"
    "replay.audit.run_report_queries = slow\n"
)


@pytest.mark.parametrize("command, sig", [("audit", signal.SIGINT), ("report", signal.SIGTERM)])
def test_an_interrupt_during_the_report_ends_in_one_line_with_130(tmp_path: Path, command: str, sig: int) -> None:
    """Ctrl-C (SIGINT) or SIGTERM while a report query runs, in ``replay audit``'s last stage and
    in ``replay report``: exit 130 and one line on stderr saying what was interrupted and what to
    do. It was exit 1 and DuckDB's traceback ending in ``RuntimeError: Query interrupted`` (its
    client drops the KeyboardInterrupt the signal raised)."""
    out = tmp_path / "run"
    if command == "report":
        assert invoke("audit", SAMPLES, "--out", out, "--jobs", "1", "-q").exit_code == 0
        args = ["report", "--run", str(out)]
    else:
        args = ["audit", str(SAMPLES), "--out", str(out), "--jobs", "1", "-q"]
    mark = tmp_path / "in-report"
    script = _wrapper(tmp_path, SLOW_REPORT.format(mark=str(mark)))
    with running([sys.executable, str(script), *args, "--duckdb-threads", "1"],
                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        # settle: DuckDB is running the query
        _, err = signal_when(proc, mark.exists, sig, never="the report never started", settle=0.3)
    text = err.decode(errors="replace")
    assert proc.returncode == 130, text[-3000:]
    assert "Traceback" not in text and len(text.strip().splitlines()) == 1, text[-3000:]
    if command == "audit":
        assert text.strip() == (f"error: interrupted during report: {out} is incomplete (run.json says so; "
                                "replay query and replay report refuse it); run the audit again")
    else:
        assert text.strip().startswith(f"error: interrupted during report: {out}/report.md")
        assert text.strip().endswith(f"run `replay report --run {out}` again")


#: The audit's render stage waits (after touching MARK) until GO exists, at most 60 s: another
#: command then meets the run folder while this audit writes it.
HELD_RENDER = (
    "import replay.audit\n"
    "render = replay.audit.run_render\n"
    "def held(*a, **k):\n"
    "    Path({mark!r}).touch()\n"
    "    end = time.monotonic() + 60\n"
    "    while not Path({go!r}).exists() and time.monotonic() < end:\n"
    "        time.sleep(0.05)\n"
    "    return render(*a, **k)\n"
    "replay.audit.run_render = held\n"
)


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*"))}


def test_a_second_command_on_a_run_folder_being_written_is_refused_at_once(tmp_path: Path) -> None:
    """``replay audit`` writing RUN (held in its render stage, a process of its own), and every
    other command that writes a run folder started on RUN meanwhile (audit, with --force too;
    ingest --force; render; stream; report): each exits 1 at once with one line naming the
    folder and the writer's pid and command, and leaves RUN as it was; ``replay query`` says the
    run is being written. The first audit then ends as if alone. Two audits into one --out
    raced: one failed with ``Failed to open local file .parts/...`` and left debris."""
    out, mark, go = tmp_path / "run", tmp_path / "in-render", tmp_path / "go"
    script = _wrapper(tmp_path, HELD_RENDER.format(mark=str(mark), go=str(go)))
    with running([sys.executable, str(script), "audit", str(SAMPLES), "--out", str(out), "--jobs", "1", "-q"],
                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        assert wait_for(mark.exists, 60), "the audit never reached its render stage"
        before = _files(out)
        for args in (["audit", SAMPLES, "--out", out], ["audit", SAMPLES, "--out", out, "--force"],
                     ["ingest", SAMPLES, "--out", out, "--force"], ["render", "--run", out], ["stream", "--run", out],
                     ["report", "--run", out]):
            t0 = time.monotonic()
            result = invoke(*args, "-q") if args[0] != "report" else invoke(*args)
            assert time.monotonic() - t0 < 10, args  # at once: nothing waits for the lock
            assert result.exit_code == 1, (args, result.output)
            assert result.stderr.strip() == (f"error: {out} is in use: pid {proc.pid} (replay audit) is writing it; "
                                             "wait for that command to end, or give another run folder"), (args, result.stderr)
            assert _files(out) == before, args
        # and the reported race itself: a second `replay audit` process on the same --out
        second = subprocess.run([sys.executable, "-m", "replay", "audit", str(SAMPLES), "--out", str(out), "--jobs", "1", "-q"],
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 1 and second.stderr.strip() == (
            f"error: {out} is in use: pid {proc.pid} (replay audit) is writing it; wait for that command to end, "
            "or give another run folder"), second.stderr[-3000:]
        assert _files(out) == before
        result = invoke("query", "summary", "--run", out)
        assert result.exit_code == 1
        assert result.stderr.strip() == (f"error: {out}: pid {proc.pid} (replay audit) is writing this run (now in its render "
                                         "stage): its tables are incomplete until it ends")
        go.touch()
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["calls.parquet", "exchanges.parquet", "family_fit.parquet", "ingest_errors.parquet", "renders.parquet",
         "report.html", "report.md", "run.json", "streams.parquet", "tools.parquet"])
    assert invoke("query", "summary", "--run", out).exit_code == 0


#: Ingest stops for good (after touching MARK) once it has written its first row group: its
#: temporary tables ``RUN/.tmp-<pid>-*.parquet`` are then on disk, for a SIGKILL to leave.
STUCK_INGEST = (
    "import replay.runner.plan\n"
    "ingest = replay.runner.plan.ingest\n"
    "def stuck(key, batch):\n"
    "    Path({mark!r}).touch()\n"
    "    time.sleep(120)\n"
    "def held(*a, **k):\n"
    "    return ingest(*a, **{{**k, 'on_exchanges': stuck}})\n"
    "replay.runner.plan.ingest = held\n"
)


def test_the_temporary_files_of_a_killed_audit_do_not_survive_its_resumed_run(tmp_path: Path) -> None:
    """``kill -9`` of ``replay audit`` while ingest writes its tables, then the same audit again
    (it resumes: the README's commands, "interrupted audit"): the resumed run ends with a run folder holding no
    ``.tmp-*`` file of the dead process (its ``.tmp-<pid>-exchanges.parquet`` and the others
    stayed for ever, each as big as its table), and the dead process's lock is taken over."""
    out, mark = tmp_path / "run", tmp_path / "in-ingest"
    script = _wrapper(tmp_path, STUCK_INGEST.format(mark=str(mark)))
    args = ["audit", str(SAMPLES), "--out", str(out), "--jobs", "1", "--batch-rows", "4", "-q"]
    with running([sys.executable, str(script), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        signal_when(proc, mark.exists, signal.SIGKILL, never="ingest never wrote a row group", timeout=30)
    left = sorted(p.name for p in out.rglob(f".tmp-{proc.pid}-*"))
    assert left == [f".tmp-{proc.pid}-exchanges.parquet", f".tmp-{proc.pid}-ingest_errors.parquet",
                    f".tmp-{proc.pid}-tools.parquet"], "the killed audit left no temporary table: nothing to test"
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "resumed" in (out / "run.json").read_text()
    assert [str(p.relative_to(out)) for p in out.rglob("*") if p.name.startswith(".")] == []


def test_only_temporary_files_no_live_process_writes_are_removed(tmp_path: Path) -> None:
    """:func:`remove_stale_temporaries`: a dead pid's ``.tmp-<pid>-*`` in the run folder (of its
    tables only), in ``.parts/`` and its table folders, and ``.tmp-audit.json``, go; a live
    process's and a file of another name stay."""
    import os

    from replay.runner.runfolder import remove_stale_temporaries

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = os.getppid()
    gone = [f".tmp-{dead.pid}-renders.parquet", f".parts/.tmp-{dead.pid}-render.json", ".parts/.tmp-audit.json",
            f".parts/renders/.tmp-{dead.pid}-part-000001.parquet", f".tmp-{os.getpid()}-run.json"]
    kept = [f".tmp-{live}-renders.parquet", f".parts/renders/.tmp-{live}-part-000002.parquet",
            f".tmp-{dead.pid}-notes.txt", "notes.txt", ".parts/renders/part-000000.parquet"]
    for name in gone + kept:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    assert sorted(str(p.relative_to(tmp_path)) for p in remove_stale_temporaries(tmp_path)) == sorted(gone)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == sorted(kept)


def test_a_rerun_after_the_captures_changed_says_which_changed(tmp_path: Path) -> None:
    """An --out holding an audit (or an ingest) of a folder of captures, then the same command
    after one capture grew, one was added and one removed, and after one was rewritten at the
    same size: refused (exit 2) naming each file and how it changed, and what to do (--force, or
    another --out), instead of the "already holds a run" given for a rerun of the same captures.
    An interrupted audit of the same captures with other options says that instead."""
    import os

    from sides_data import write_capture

    caps = tmp_path / "caps"
    caps.mkdir()
    a, b, c = (write_capture(caps / f"{n}.jsonl", [["read"]]) for n in "abc")
    for cmd in ("audit", "ingest"):
        out = tmp_path / cmd
        assert invoke(cmd, caps, "--out", out, "-q").exit_code == 0
        same = invoke(cmd, caps, "--out", out, "-q")
        assert same.exit_code == 2 and "already holds a run" in same.stderr, same.stderr
    size_a = a.stat().st_size
    with a.open("ab") as f:
        f.write(a.read_bytes())  # a second copy of its exchange
    c.unlink()
    write_capture(caps / "d.jsonl", [["read"]])
    st = b.stat()
    b.write_bytes(b.read_bytes().replace(b"task 0", b"task 9"))  # the same size, a new mtime
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    for cmd in ("audit", "ingest"):
        out = tmp_path / cmd
        result = invoke(cmd, caps, "--out", out, "-q")
        assert result.exit_code == 2, result.output
        assert result.stderr.strip() == (
            f"error: --out {out} holds a run of other captures than these ({a} modified ({size_a:,} -> {2 * size_a:,} "
            f"bytes); {b} modified (same size, modified since the run); {caps / 'd.jsonl'} added; {c} removed); give --force "
            "to replace it with a run of these captures, or another --out"), result.stderr
        assert invoke(cmd, caps, "--out", out, "-q", "--force").exit_code == 0
    # an interrupted audit (its state left in .parts) rerun with another option
    out = tmp_path / "audit"
    state = out / ".parts" / "audit.json"
    state.parent.mkdir()
    state.write_text('{"fingerprint": "of other options", "ingest": null}')
    result = invoke("audit", caps, "--out", out, "-q", "--batch-rows", "7")
    assert result.exit_code == 2 and result.stderr.strip() == (
        f"error: --out {out} holds an interrupted audit of these captures with other options (run.json options): run it "
        "again with those options to resume it, give --force to replace it, or another --out"), result.stderr


#: ``replay render``'s stage waits (after touching MARK) for a signal.
HELD_STAGE = (
    "import replay.runner.driver\n"
    "def held(*a, **k):\n"
    "    Path({mark!r}).touch()\n"
    "    time.sleep(60)\n"
    "replay.runner.driver.run_render = held\n"
)


def test_an_interrupt_during_replay_render_ends_in_one_line_with_130(tmp_path: Path) -> None:
    """Ctrl-C during ``replay render --run``'s stage: exit 130 and one line saying the run is
    incomplete and how to resume it (typer ended it with 130 and not a word), the run folder's
    lock released (the rerun is not refused)."""
    out, mark = tmp_path / "run", tmp_path / "in-render"
    assert invoke("ingest", SAMPLES, "--out", out, "-q").exit_code == 0
    script = _wrapper(tmp_path, HELD_STAGE.format(mark=str(mark)))
    with running([sys.executable, str(script), "render", "--run", str(out), "--jobs", "1", "-q"],
                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        _, err = signal_when(proc, mark.exists, signal.SIGINT, never="the render stage never started")
    assert proc.returncode == 130, err.decode(errors="replace")[-3000:]
    assert err.decode().strip() == (f"error: interrupted during render: {out} is incomplete (run.json says so; replay query and "
                                    f"replay report refuse it); run `replay render --run {out}` again with the same options: it resumes")
    assert not (out / ".replay.lock").exists()
    assert invoke("render", "--run", out, "--jobs", "1", "-q").exit_code == 0


def _interrupt_at(name: str):
    """A progress callback for :func:`replay.audit.audit` that raises KeyboardInterrupt (a Ctrl-C)
    when stage ``name`` starts."""

    @contextlib.contextmanager
    def stage(stage_name: str, total: int | None):
        if stage_name == name:
            raise KeyboardInterrupt
        yield lambda n: None

    return stage


def test_interrupted_audit_into_an_old_run_leaves_no_table_read_as_complete(tmp_path: Path) -> None:
    run = tmp_path / "run"
    audit([AGENT], run, AuditConfig(renderer=JsonToolsRenderer(), chunkings=("whole",)))
    assert (run / "streams.parquet").is_file()
    with pytest.raises(KeyboardInterrupt):
        # force: an --out holding a finished run is refused otherwise (replay.audit.prepare_out)
        audit([SAMPLES / "model-gateway.jsonl"], run, AuditConfig(renderer=JsonToolsRenderer(), chunkings=("whole",)), stage=_interrupt_at("re-stream"), force=True)
    # the first run's streams/calls must not sit beside the second run's exchanges
    assert not (run / "streams.parquet").exists()
    assert not (run / "calls.parquet").exists()
    for args in (["query", "summary", "--run", str(run)], ["report", "--run", str(run)], ["query", "--run", str(run), "--sql", "SELECT 1"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (args, result.output)
        assert "stopped during re-stream" in result.output and "incomplete" in result.output
    # finishing the missing stage makes it a run again
    result = runner.invoke(app, ["stream", "--run", str(run), "--chunkings", "whole", "-q"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["query", "summary", "--run", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output


def test_finished_audit_is_not_marked_incomplete(tmp_path: Path) -> None:
    import json

    run = tmp_path / "run"
    audit([AGENT], run, AuditConfig(renderer=JsonToolsRenderer(), chunkings=("whole",)))
    assert "incomplete" not in json.loads((run / "run.json").read_text())
    result = runner.invoke(app, ["report", "--run", str(run)])
    assert result.exit_code == 0, result.output


def test_a_ctrl_c_inside_a_python_udf_of_a_query_is_an_interrupt_not_a_query_error() -> None:
    """A Ctrl-C that lands while DuckDB runs Python code of ours (the ``is_json_object`` UDF of the
    report's queries, the scan of the registered ``checks`` table) reaches replay as DuckDB's
    ``Invalid Input Error: Python exception occurred while executing the UDF: KeyboardInterrupt``;
    run_sql gives it back as the KeyboardInterrupt (exit 130, one line), not a QueryError (exit 1)."""
    import duckdb

    from replay.sql import QueryError, is_interrupt, run_sql

    con = duckdb.connect()

    def interrupted(x: int) -> int:
        raise KeyboardInterrupt

    con.create_function("interrupted", interrupted, ["INTEGER"], "INTEGER")
    with pytest.raises(KeyboardInterrupt):
        run_sql(con, "SELECT interrupted(1)")

    def failing(x: int) -> int:
        raise ValueError("KeyboardInterrupt in the data is not an interrupt")

    con.create_function("failing", failing, ["INTEGER"], "INTEGER")
    with pytest.raises(QueryError):
        run_sql(con, "SELECT failing(1)")
    assert is_interrupt(duckdb.InvalidInputException(
        "Invalid Input Error: counting the rows of the object registered as 'checks' failed: KeyboardInterrupt: "))


def test_replay_report_finishes_a_run_stopped_during_its_report(tmp_path: Path) -> None:
    """An audit stopped in its report stage left whole tables and ``incomplete: report``;
    ``replay query`` refuses it and says ``replay report --run RUN`` finishes it, and that command
    does (it used to refuse too, with the same advice): the report is written and the mark removed."""
    import json

    out = tmp_path / "run"
    assert invoke("audit", SAMPLES, "--out", out, "--jobs", "1", "-q").exit_code == 0
    meta = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**meta, "incomplete": "report"}))
    (out / "report.md").unlink()
    refused = invoke("query", "summary", "--run", out)
    assert refused.exit_code == 1 and f"(or finish it: replay report --run {out})" in " ".join(refused.output.split())
    done = invoke("report", "--run", out)
    assert done.exit_code == 0, done.output
    assert (out / "report.md").is_file() and "incomplete" not in json.loads((out / "run.json").read_text())
    assert invoke("query", "summary", "--run", out).exit_code == 0


def test_every_writing_command_goes_through_one_run_folder_object(tmp_path: Path, monkeypatch) -> None:
    """``replay ingest``, ``render``, ``stream``, ``report`` and ``audit`` open, mark and finish
    their run through :class:`replay.runner.runfolder.RunFolder` alone (issue #22: the lifecycle was
    written three times): its marks, in order, are each command's stages, and each leaves a
    finished ``run.json`` (no ``incomplete``) with the lock file gone."""
    import json

    from replay.runner import runfolder

    seen: list[tuple[str, str]] = []
    finished: list[str] = []
    mark, finish = runfolder.RunFolder.mark, runfolder.RunFolder.finish

    def spy_mark(self, stage):
        seen.append((self.command, stage))
        return mark(self, stage)

    def spy_finish(self, **kw):
        finished.append(self.command)
        return finish(self, **kw)

    monkeypatch.setattr(runfolder.RunFolder, "mark", spy_mark)
    monkeypatch.setattr(runfolder.RunFolder, "finish", spy_finish)
    run = tmp_path / "run"
    for args in (["ingest", str(AGENT), "--out", str(run)], ["render", "--run", str(run), "--jobs", "1"],
                 ["stream", "--run", str(run), "--jobs", "1"], ["audit", str(AGENT), "--out", str(tmp_path / "a"), "--jobs", "1"]):
        got = runner.invoke(app, args)
        assert got.exit_code == 0, got.output
    assert seen == [("replay ingest", "ingest"), ("replay render", "render"), ("replay stream", "re-stream"),
                    ("replay audit", "ingest"), ("replay audit", "render"), ("replay audit", "re-stream"), ("replay audit", "report")]
    assert finished == ["replay ingest", "replay render", "replay stream", "replay audit"]
    for folder in (run, tmp_path / "a"):
        assert "incomplete" not in json.loads((folder / "run.json").read_text(encoding="utf-8"))
        assert not (folder / ".replay.lock").exists()
    # a second ingest into the run is refused by the same object, naming the run's files
    got = runner.invoke(app, ["ingest", str(AGENT), "--out", str(run)])
    assert got.exit_code == 2 and "already holds a run" in got.output


def test_run_folder_lifecycle_on_its_own(tmp_path: Path) -> None:
    """:class:`RunFolder` by itself: lock (a second holder refused), mark, describe, finish, release."""
    from replay.runner.runfolder import RunExistsError, RunFolder, RunInUseError

    folder = RunFolder(tmp_path / "r", "replay test")
    assert folder.lock(create=False) is False and not (tmp_path / "r").exists()
    with folder:
        assert folder.lock() is True
        with pytest.raises(RunInUseError, match="replay test"):
            RunFolder(tmp_path / "r", "replay other").lock()
        folder.meta = {"options": {}}
        folder.mark("render")
        assert folder.incomplete_stage() == "render"
        assert folder.writer() is None  # this process holds it
        folder.finish()
        assert folder.incomplete_stage() is None and folder.read_meta() == {"options": {}}
        with pytest.raises(RunExistsError, match="already holds a run \\(run.json\\)"):
            folder.refuse_existing(False)
        assert folder.refuse_existing(True) == ["run.json"]
    assert not (tmp_path / "r" / ".replay.lock").exists()
