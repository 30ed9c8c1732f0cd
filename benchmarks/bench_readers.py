"""Seconds and peak memory of ingesting the whole-file and paired capture formats at size.

Run: ``python benchmarks/bench_readers.py [--batch 20000 100000] [--har 20000]``

For each size it writes, in a temporary folder, an OpenAI Batch pair (input JSON lines in request
order, output ``.jsonl.zst`` in reverse order, so that every join reads back through the index) or
a HAR of that many chat entries, ingests it in a child process (a clean heap per size) and prints:
format, records, input bytes, seconds, and the child's peak RSS in MiB. The Batch join keeps one
index entry per output line and the HAR is streamed entry by entry, so the peak grows far slower
than the input.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parents[1]
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "d",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def body(i: int) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": f"question {i} " + "x" * 200}], "tools": [TOOL]}


def answer(i: int) -> dict:
    return {"object": "chat.completion", "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "y" * 200,
        "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "a"}'}}]}}]}


def write_batch(folder: Path, n: int) -> int:
    with open(folder / "job_input.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": body(i)}) + "\n")
    with open(folder / "job_output.jsonl.zst", "wb") as raw, zstandard.ZstdCompressor().stream_writer(raw) as w:
        for i in reversed(range(n)):
            w.write((json.dumps({"id": f"b{i}", "custom_id": f"r{i}", "response": {"status_code": 200, "body": answer(i)}}) + "\n").encode())
    return sum(p.stat().st_size for p in folder.iterdir())


def write_har(folder: Path, n: int) -> int:
    path = folder / "capture.har"
    with open(path, "w") as f:
        f.write('{"log": {"version": "1.2", "entries": [')
        for i in range(n):
            entry = {"startedDateTime": "2025-01-01T00:00:00Z",
                     "request": {"method": "POST", "url": "https://x/v1/chat/completions", "headers": [],
                                 "postData": {"mimeType": "application/json", "text": json.dumps(body(i))}},
                     "response": {"status": 200, "content": {"mimeType": "application/json", "text": json.dumps(answer(i))}}}
            f.write(("," if i else "") + json.dumps(entry))
        f.write("]}}")
    return path.stat().st_size


CHILD = """
import resource, sys, time
from replay.capture import ingest
t = time.perf_counter()
s = ingest(sys.argv[1], sys.argv[2])
print(s.lines, s.exchanges, s.errors, round(time.perf_counter() - t, 2), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def run(kind: str, n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "in"
        folder.mkdir()
        size = write_batch(folder, n) if kind == "batch" else write_har(folder, n)
        out = subprocess.run([sys.executable, "-c", CHILD, str(folder), str(Path(tmp) / "run")], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
        lines, ex, err, secs, rss = out
        print(f"{kind:6} records={lines:>7} exchanges={ex:>7} errors={err} input={size / 1e6:7.1f} MB  {secs:>6} s  peak RSS {rss} MiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="*", default=[20_000, 100_000])
    ap.add_argument("--har", type=int, nargs="*", default=[20_000])
    args = ap.parse_args()
    for n in args.batch:
        run("batch", n)
    for n in args.har:
        run("har", n)


if __name__ == "__main__":
    main()
