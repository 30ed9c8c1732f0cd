"""benchmarks/bench_scale.py writes captures of the promised shape (its speed is never asserted here).

Runs the benchmark's capture writer for 50 exchanges (``--only write``) and checks every line: a
capture-v1 line that :func:`replay.capture.v1.parse_line` takes, a Qwen3 request with tools and a
history of 5-60 KB whose assistant tool-call turns have ``content: null`` and JSON-string
``arguments`` (as the OpenAI SDK sends them) answered by tool results, a raw completion in Hermes
syntax with 0-3 calls of the request's own tools, and server steps that join to it.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import zstandard

from replay.capture.v1 import parse_line

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_scale.py"


def _lines(path: Path) -> list[bytes]:
    with path.open("rb") as f:
        return [line.rstrip(b"\n") for line in io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(f))]


def test_capture_writer_gives_v1_lines_of_the_promised_shape(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--sizes", "50", "--only", "write", "--dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    cap = tmp_path / "scale-50.jsonl.zst"
    lines = _lines(cap)
    assert len(lines) == 50
    n_calls = set()
    for i, raw in enumerate(lines, 1):
        row, tools = parse_line(raw, str(cap), i)
        assert row["route"] == "chat.completions" and row["model"].startswith("Qwen/Qwen3") and row["stream"] is True
        assert len(tools) == row["n_tools"] > 0 and all(t["name"] for t in tools)
        rec = json.loads(raw)
        msgs = rec["request"]["messages"]
        assert msgs[0]["role"] == "system" and 1024 <= len(msgs[0]["content"]) <= 3072
        assert 5 << 10 <= len(json.dumps(msgs)) <= 60 << 10
        calls = [c for m in msgs if m["role"] == "assistant" and m.get("tool_calls") for c in m["tool_calls"]]
        assert calls and all(m["content"] is None for m in msgs if m.get("tool_calls"))
        assert all(isinstance(json.loads(c["function"]["arguments"]), dict) for c in calls)
        answered = {m["tool_call_id"] for m in msgs if m["role"] == "tool"}
        assert {c["id"] for c in calls} == answered
        text, steps = rec["server"]["output_text"], rec["server"]["steps"]
        assert "".join(steps) == text and all(s for s in steps)
        assert all(s.count("<tool_call>") <= 1 for s in steps)  # a marker is one token: never cut
        found = re.findall(r"<tool_call>\n(.*?)\n</tool_call>", text, re.S)
        n_calls.add(len(found))
        names = {t["name"] for t in tools}
        assert all(json.loads(c)["name"] in names for c in found)
    assert n_calls <= {0, 1, 2, 3} and len(n_calls) >= 2
    assert 15 << 10 <= sum(map(len, lines)) / len(lines) <= 60 << 10  # ~30 KB an exchange


def test_capture_writer_is_deterministic(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH.parent))
    try:
        import bench_scale
    finally:
        sys.path.remove(str(BENCH.parent))
    a = bench_scale.write_capture(tmp_path / "a.jsonl.zst", 20, seed=3)
    b = bench_scale.write_capture(tmp_path / "b.jsonl.zst", 20, seed=3)
    c = bench_scale.write_capture(tmp_path / "c.jsonl.zst", 20, seed=4)
    assert a["sha256"] == b["sha256"] == hashlib.sha256(b"".join(x + b"\n" for x in _lines(tmp_path / "a.jsonl.zst"))).hexdigest()
    assert c["sha256"] != a["sha256"]
