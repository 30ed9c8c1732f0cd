"""What the terminal shows a new user (issue #20, "no wrong number, hang or traceback under
faults"): faults said, not silent, and captured text never acting on the terminal.

- an exchange whose recorded chunking the secret scrub dropped (a secret-shaped string split across
  two recorded deltas) is counted in the terminal, ``report.md`` and the ingest output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.cli import app
from sides_data import TOOL, call_text, query_json, runner

SK = "sk-proj-Prompt9f8e7d6c5b4a3210ZYXW"  # an OpenAI-shaped key (as tests/test_secrets.py plants)


def _record(eid: str, steps: list[str], model: str = "Qwen/Qwen3-8B", tool: dict = TOOL) -> dict:
    return {"id": eid, "route": "chat.completions", "model": model,
            "request": {"model": model, "messages": [{"role": "user", "content": "go"}], "tools": [tool]},
            "server": {"output_text": "".join(steps), "steps": steps}}


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_scrub_that_drops_the_recorded_chunking_is_said(tmp_path):
    """Three exchanges with a raw completion and its recorded steps: the key split across two steps
    (`split`) is replaced in the completion but not in the steps, so its steps no longer join and
    are dropped; the key whole in one step (`whole`) is replaced in both and keeps its chunking;
    `clean` holds none. The loss is counted once, and said in the audit's terminal output,
    report.md and `replay ingest`'s output."""
    body = call_text("read")
    cap = _write(tmp_path / "c.jsonl", [
        _record("split", ["Key ", SK[:10], SK[10:] + " then.\n", body]),
        _record("whole", ["Key ", SK, " then.\n", body]),
        _record("clean", ["Key none then.\n", body]),
    ])
    sentence = ("1 exchange lost its recorded chunking: the secret scrub rewrote its completion (a secret-shaped "
                "string split across recorded deltas), so the deltas no longer joined to it and were dropped; "
                "the other chunkings still replay it.")
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", str(cap), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    assert f"• {sentence}" in result.output
    assert f"- {sentence}" in (out / "report.md").read_text(encoding="utf-8")
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["ingest"]["redactions"]["steps-dropped"] == 1
    got = {r["exchange_id"]: r["recorded"] for r in query_json(
        out, "SELECT exchange_id, bool_or(chunking = 'recorded') AS recorded FROM streams GROUP BY 1")}
    assert got == {"split": False, "whole": True, "clean": True}
    assert SK not in result.output
    result = runner.invoke(app, ["ingest", str(cap), "--out", str(tmp_path / "ing"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert sentence in result.output.splitlines()
