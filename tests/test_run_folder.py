"""The run folder under faults (issue #20): a Ctrl-C or SIGTERM during the report, two commands
on one ``--out``, the temporary files of a killed run, a rerun after the captures changed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sides_data import SAMPLES, invoke

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="signals and flock as on Linux")


def _wait_for(cond, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


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
    proc = subprocess.Popen([sys.executable, str(script), *args, "--duckdb-threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert _wait_for(mark.exists, 60), "the report never started"
        time.sleep(0.3)  # DuckDB is running the query
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err.decode(errors="replace")
    assert proc.returncode == 130, text[-3000:]
    assert "Traceback" not in text and len(text.strip().splitlines()) == 1, text[-3000:]
    if command == "audit":
        assert text.strip() == (f"error: interrupted during report: {out} is incomplete (run.json says so; "
                                "replay query and replay report refuse it); run the audit again")
    else:
        assert text.strip().startswith(f"error: interrupted during report: {out}/report.md")
        assert text.strip().endswith(f"run `replay report --run {out}` again")
