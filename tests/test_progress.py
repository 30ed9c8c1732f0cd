"""Progress on stderr (replay.runner.progress): the plain line form used when stderr is not a terminal (CI,
logs), with the clock injected instead of sleeping; --quiet silences it (issue 9, item 7)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.runner.progress import LineProgress, reporter, status_line


class Clock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_status_line_forms() -> None:
    assert status_line("render", 4096, 20000, 10.0, "exchanges") == "replay: render 4,096/20,000 exchanges (20%), 410 exchanges/s, ETA 39s"
    assert status_line("ingest", 12_300_000, 63_200_000, 4.0, "bytes") == "replay: ingest 12.3 MB/63.2 MB (19%), 3.1 MB/s, ETA 17s"
    assert status_line("ingest", 5_000, None, 2.0, "bytes") == "replay: ingest 5.0 kB, 2.5 kB/s"
    assert status_line("re-stream", 0, 100, 0.0, "exchanges") == "replay: re-stream 0/100 exchanges (0%)"
    assert status_line("re-stream", 100, 100, 200.0, "exchanges", finished=True) == "replay: re-stream 100/100 exchanges (100%), 0 exchanges/s, done in 3m20s"


def test_a_line_every_interval_not_every_advance() -> None:
    out, clock = io.StringIO(), Clock()
    lines = LineProgress(out, interval=10.0, clock=clock)
    with lines.stage("render", 1000) as advance:
        for _ in range(9):  # 9 s: no line beyond the first
            clock.now += 1.0
            advance(10)
        assert out.getvalue().splitlines() == ["replay: render 0/1,000 exchanges (0%)"]
        clock.now += 1.0  # 10 s since the stage started
        advance(10)
        clock.now += 5.0
        advance(50)  # 5 s since the last line: none
        clock.now += 5.0
        advance(50)
        clock.now += 2.0
    assert out.getvalue().splitlines() == [
        "replay: render 0/1,000 exchanges (0%)",
        "replay: render 100/1,000 exchanges (10%), 10 exchanges/s, ETA 1m30s",
        "replay: render 200/1,000 exchanges (20%), 10 exchanges/s, ETA 1m20s",
        "replay: render 1,000/1,000 exchanges (100%), 45 exchanges/s, done in 22s",
    ]


def test_a_stage_that_raises_says_where_it_stopped() -> None:
    out, clock = io.StringIO(), Clock()
    with pytest.raises(RuntimeError):
        with LineProgress(out, clock=clock).stage("ingest", 2_000_000) as advance:
            clock.now += 4.0
            advance(1_000_000)
            raise RuntimeError("disk")
    assert out.getvalue().splitlines()[-1] == "replay: ingest 1.0 MB/2.0 MB (50%), 250.0 kB/s, ETA 4s (stopped)"


def test_reporter_picks_the_form() -> None:
    out, clock = io.StringIO(), Clock()
    with reporter(terminal=False, out=out, clock=clock) as stage:
        with stage("render", 10) as advance:
            advance(10)
    assert out.getvalue().startswith("replay: render 0/10 exchanges")
    out = io.StringIO()
    with reporter(quiet=True, terminal=False, out=out) as stage:
        with stage("render", 10) as advance:
            advance(10)
    assert out.getvalue() == ""


def test_cli_audit_writes_lines_to_stderr_unless_quiet(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parent.parent / "samples" / "coding-agent.jsonl"
    runner = CliRunner()  # stderr apart from stdout, and not a terminal
    res = runner.invoke(app, ["audit", str(sample), "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    stages = [ln.split()[1] for ln in res.stderr.splitlines() if ln.startswith("replay: ") and "done in" in ln]
    assert stages == ["ingest", "render", "re-stream"]
    res = runner.invoke(app, ["audit", str(sample), "--out", str(tmp_path / "b"), "--quiet"])
    assert res.exit_code == 0, res.output
    assert "replay: " not in res.stderr
