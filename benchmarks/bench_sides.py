"""Throughput of in-process sides against out-of-process (worker) sides, in exchanges per second.

Run: ``python benchmarks/bench_sides.py [--exchanges 2000] [--chunkings whole,char,fixed-8] [--python PATH]``

It writes a capture of generated Qwen3 (Hermes) exchanges (1 to 3 calls each, arguments of about
200 chars), ingests it once, then times the render stage and the re-stream stage of the same run
three ways: both sides in process, the old side in a worker, both sides in workers (``--python``,
default this interpreter). The old side's parser is a plugin subclass of the built-in Hermes
parser that changes nothing, so that old and new are replayed separately in every mode (two
equal built-in parsers are replayed once). Workers are started before the clock starts, as an
audit starts them once. Prints one line per mode: wall seconds and exchanges/s per stage, and
the CPU seconds of the re-stream stage in this process and in the workers (on a busy machine the
CPU seconds are the fairer measure of what the worker protocol costs).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from replay.capture import discover, ingest  # noqa: E402
from replay.runspec import AuditConfig  # noqa: E402
from replay.runner.driver import run_render, run_stream
from replay.stages.validate import validate_specs
from replay.render import JsonToolsRenderer  # noqa: E402
from replay.sides import close_sides  # noqa: E402

PLUGIN = "from replay.parsers.hermes import HermesParser\nclass Same(HermesParser):\n    '''The built-in parser under another class.'''\n"

TOOLS = [
    {"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "bash", "description": "Run a command.", "parameters": {"type": "object"}, "strict": False}},
]


def write_capture(path: Path, n: int, seed: int = 0) -> None:
    """``n`` exchanges with 1-3 calls each to ``read``/``bash`` and ~200-char arguments."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            blocks = []
            for _ in range(rng.randint(1, 3)):
                name = rng.choice(["read", "bash"])
                args = {"path" if name == "read" else "command": " ".join(rng.choice(["src", "ls -la", "a.py", "grep -n x"]) for _ in range(30))}
                blocks.append(f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>")
            line = {
                "id": f"b{i}",
                "route": "chat.completions",
                "model": "Qwen/Qwen3-8B",
                "request": {"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": f"task {i}"}], "tools": TOOLS},
                "server": {"output_text": "I will look.\n" + "\n".join(blocks)},
            }
            f.write(json.dumps(line) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=2000)
    ap.add_argument("--chunkings", default="whole,char,fixed-8")
    ap.add_argument("--python", default=sys.executable, help="interpreter of the worker sides")
    args = ap.parse_args()
    chunkings = tuple(args.chunkings.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        cap, run = Path(tmp) / "cap.jsonl", Path(tmp) / "run"
        write_capture(cap, args.exchanges)
        run.mkdir()
        ingest(discover([str(cap)]), run)
        plugin = Path(tmp) / "same.py"
        plugin.write_text(PLUGIN)
        modes = {
            "in process": {},
            "old in a worker": {"old_python": args.python},
            "old and new in workers": {"old_python": args.python, "new_python": args.python},
        }
        print(f"{args.exchanges} exchanges, chunkings {args.chunkings}, worker python {args.python}")
        print(f"{'mode':<24} {'render s':>8} {'render ex/s':>11} {'stream s':>8} {'stream ex/s':>11} {'stream CPU s: here':>18} {'workers':>7}")
        for label, extra in modes.items():
            cfg = AuditConfig(renderer=JsonToolsRenderer(), chunkings=chunkings, old_parser=f"{plugin}:Same", **extra)
            validate_specs(cfg)  # starts the workers, as an audit does before its stages
            try:
                t0 = time.perf_counter()
                run_render(run, cfg)
                t1 = time.perf_counter()
                c1, w1 = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
                run_stream(run, cfg)
                t2 = time.perf_counter()
                c2 = time.process_time()
            finally:
                meta = close_sides(cfg)  # a worker's CPU time is counted once it has exited
            w2 = resource.getrusage(resource.RUSAGE_CHILDREN)
            workers_cpu = (w2.ru_utime + w2.ru_stime) - (w1.ru_utime + w1.ru_stime)
            assert not any((m or {}).get("restarts") for m in (meta or {}).values())
            n = args.exchanges
            print(
                f"{label:<24} {t1 - t0:>8.2f} {n / (t1 - t0):>11.0f} {t2 - t1:>8.2f} {n / (t2 - t1):>11.0f} "
                f"{c2 - c1:>18.2f} {workers_cpu:>7.2f}"
            )


if __name__ == "__main__":
    main()
