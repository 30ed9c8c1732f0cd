"""Faults a new user hit following README.md, then trying bad options and bad captures: each gives
a clear error (or is counted per record), never a traceback, and the run goes on where it can."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from sides_data import invoke, query_json, summary, write_capture

NAMES = [["read"], ["read", "edit"]]


def _audit(tmp_path: Path, *args: str) -> Path:
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    out = tmp_path / "run"
    result = invoke("audit", capture, "--out", out, "-q", "--chunkings", "whole,char", *args)
    assert result.exit_code == 0, result.output
    return out


def test_a_run_written_by_an_older_replay_still_reports_and_queries(tmp_path: Path) -> None:
    """An older run lacks the columns added since (capture_format, served_*, prompt_ids_sha256):
    `replay report`, `replay query` and `replay stream` read those as null instead of failing with
    DuckDB's binder error (a traceback for report and stream)."""
    out = _audit(tmp_path)
    ex = pq.read_table(out / "exchanges.parquet")
    pq.write_table(ex.drop(["capture_format", "capture_lacks", "served_markup"]), out / "exchanges.parquet")
    rn = pq.read_table(out / "renders.parquet")
    pq.write_table(rn.drop(["prompt_ids_sha256", "tokens_differing"]), out / "renders.parquet")

    result = invoke("report", "--run", out)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "calls" in result.output
    got = summary(out)
    assert got["old"]["exchanges"] == 2 and got["old"]["calls_whole"] == 3
    assert query_json(out, "SELECT count(*) AS n FROM exchanges WHERE capture_format IS NULL") == [{"n": 2}]
    result = invoke("stream", "--run", out, "--chunkings", "whole", "-q")
    assert result.exit_code == 0, result.output
    assert summary(out)["new"]["calls_dropped"] == 0
