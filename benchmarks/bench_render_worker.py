"""The render stage with a side rendered in its own interpreter (``--old-render-in python``), in CPU seconds.

Run: ``python benchmarks/bench_render_worker.py [--exchanges 1000] [--python PATH] [--template FILE]``

It writes a capture of generated multi-turn agent requests (a system prompt, a task, 1-4 rounds of
an assistant tool-call turn with ``content: null`` and JSON-string arguments and its tool results;
four tools), ingests it once, then times the render stage through a chat template (default
``samples/templates/agent-old.jinja``) three ways: every side in process; the old side rendered by
its worker (``old_render_in="python"``); old and new each by its worker (``--python``, default this
interpreter). ``model-dump`` (old) and ``client-fields`` (new) differ, so each side renders its
own prompt. Workers are started before the clock starts, as an audit starts them once. Prints one
line per mode: wall seconds, exchanges/s, CPU seconds in this process and in the workers (their
start-up included: a first line gives one worker's start and stop alone; on a busy machine the CPU
seconds are the fairer measure of what rendering through the protocol costs), and whether the
``renders`` rows equal the in-process ones.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow.parquet as pq  # noqa: E402

from replay.capture import discover, ingest  # noqa: E402
from replay.runner.driver import run_render  # noqa: E402
from replay.stages.validate import validate_specs
from replay.runspec import RunSpec, build_config  # noqa: E402
from replay.sides import close_sides  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "run_shell", "description": "Run a command.", "strict": True, "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "edit_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "new": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "search", "description": "Search the code.", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}},
]


def write_capture(path: Path, n: int, seed: int = 0) -> None:
    """``n`` multi-turn agent requests (no completions: the render stage only)."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            messages = [{"role": "system", "content": "You are a coding agent. " * 20}, {"role": "user", "content": f"Fix issue {i} in the repository."}]
            for r in range(rng.randint(1, 4)):
                calls = [{"id": f"call_{i}_{r}_{k}", "type": "function",
                          "function": {"name": rng.choice(["read_file", "search"]), "arguments": json.dumps({"path": f"src/m{rng.randint(0, 99)}.py"})}}
                         for k in range(rng.randint(1, 2))]
                messages.append({"role": "assistant", "content": None, "tool_calls": calls})
                for c in calls:
                    messages.append({"role": "tool", "tool_call_id": c["id"], "content": "def main():\n    return 1\n" * rng.randint(5, 40)})
            request = {"model": "Qwen/Qwen3-8B", "messages": messages, "tools": TOOLS}
            f.write(json.dumps({"id": f"a{i}", "route": "chat.completions", "model": "Qwen/Qwen3-8B", "request": request}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=1000)
    ap.add_argument("--python", default=sys.executable, help="interpreter of the worker sides")
    ap.add_argument("--template", default=str(ROOT / "samples" / "templates" / "agent-old.jinja"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cap, base = Path(tmp) / "cap.jsonl", Path(tmp) / "base"
        write_capture(cap, args.exchanges)
        base.mkdir()
        ingest(discover([str(cap)]), base)
        modes = {
            "in process": {},
            "old rendered in a worker": {"old_python": args.python, "old_render_in": "python"},
            "both rendered in workers": {"old_python": args.python, "old_render_in": "python", "new_python": args.python, "new_render_in": "python"},
        }
        print(f"{args.exchanges} exchanges, template {args.template}, worker python {args.python}")
        print(f"{'mode':<26} {'wall s':>7} {'ex/s':>6} {'CPU s: here':>11} {'workers':>7}  rows equal")
        # what starting and stopping one rendering worker costs with no exchange (counted in the
        # workers column of the modes below: a worker's CPU is read when it has exited)
        cfg = build_config(RunSpec(chat_template=args.template, old_python=args.python, old_render_in="python"))
        w0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        validate_specs(cfg)
        close_sides(cfg)
        w1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        print(f"{'one worker, start + stop':<26} {'':>7} {'':>6} {'':>11} {(w1.ru_utime + w1.ru_stime) - (w0.ru_utime + w0.ru_stime):>7.2f}")
        first = None
        for label, extra in modes.items():
            run = Path(tmp) / label.replace(" ", "-")
            run.mkdir()
            shutil.copy(base / "exchanges.parquet", run)
            cfg = build_config(RunSpec(chat_template=args.template, **extra))
            validate_specs(cfg)  # starts the workers, as an audit does before its stages
            try:
                w1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                c0, t0 = time.process_time(), time.perf_counter()
                run_render(run, cfg)
                t1, c1 = time.perf_counter(), time.process_time()
            finally:
                meta = close_sides(cfg)  # a worker's CPU time is counted once it has exited
            w2 = resource.getrusage(resource.RUSAGE_CHILDREN)
            assert not any((m or {}).get("restarts") for m in (meta or {}).values())
            rows = pq.read_table(run / "renders.parquet").sort_by([("exchange_id", "ascending"), ("side", "ascending")]).to_pylist()
            first = rows if first is None else first
            workers = (w2.ru_utime + w2.ru_stime) - (w1.ru_utime + w1.ru_stime)
            n = args.exchanges
            print(f"{label:<26} {t1 - t0:>7.2f} {n / (t1 - t0):>6.0f} {c1 - c0:>11.2f} {workers:>7.2f}  {rows == first}")


if __name__ == "__main__":
    main()
