"""Shared pieces of the side tests (tests/test_sides.py, tests/test_worker.py): a small capture of
Hermes-family exchanges written for these tests, and the CLI runner helpers."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from replay.cli import app

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"

runner = CliRunner()

#: A tool declared without ``description`` or ``strict``: ``model-dump`` writes both as null.
TOOL = {
    "type": "function",
    "function": {"name": "read", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
}


def call_text(*names: str) -> str:
    """A raw Qwen3 (Hermes) completion with one ``<tool_call>`` block per name."""
    return "Let me look.\n" + "\n".join(
        f'<tool_call>\n{{"name": "{n}", "arguments": {{"path": "{n}.py"}}}}\n</tool_call>' for n in names
    )


def write_capture(path: Path, names: list[list[str]]) -> Path:
    """A capture file with one exchange per entry of ``names`` (ids ``x0``, ``x1`` ...), each with
    TOOL declared and a raw completion calling those names."""
    lines = []
    for i, calls in enumerate(names):
        lines.append(
            {
                "id": f"x{i}",
                "route": "chat.completions",
                "model": "Qwen/Qwen3-8B",
                "request": {"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": f"task {i}"}], "tools": [TOOL]},
                "server": {"output_text": call_text(*calls)},
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(l) + "\n" for l in lines), encoding="utf-8")
    return path


def invoke(*args: str):
    """Run the CLI; returns the click Result."""
    return runner.invoke(app, [str(a) for a in args])


def query_json(run_dir: Path, sql: str) -> list[dict]:
    """Rows of ``sql`` over a run's tables."""
    result = runner.invoke(app, ["query", "--run", str(run_dir), "--sql", sql, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def summary(run_dir: Path) -> dict[str, dict]:
    """The ``summary`` query by side."""
    result = runner.invoke(app, ["query", "summary", "--run", str(run_dir), "--format", "json"])
    assert result.exit_code == 0, result.output
    return {r["side"]: r for r in json.loads(result.output)}


#: A planted faulty parser: withholds each step's call deltas until the next step, and finish()
#: forgets the last ones (the missing end-of-stream flush). Under ``whole`` every call is lost.
LATE_FLUSH = """
from replay.parsers.hermes import HermesParser
from replay.parsers.base import StreamDelta


class LateFlush(HermesParser):
    def __init__(self, tools=None, **kw):
        super().__init__(tools, **kw)
        self._held = []

    def feed(self, delta):
        out = super().feed(delta)
        calls, self._held = self._held, out.calls
        return StreamDelta(content=out.content, calls=calls, reasoning=out.reasoning)

    def finish(self):
        end = super().finish()
        return StreamDelta(content=end.content, reasoning=end.reasoning)
"""
