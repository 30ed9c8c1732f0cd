"""Throughput and peak memory of `replay audit` on generated captures of growing size.

Run: ``python benchmarks/bench_audit.py [--exchanges 2000 8000] [--chunkings whole,char,fixed-8]``

For each size it writes a ``.jsonl.zst`` capture by repeating the bundled samples (fresh ids), runs
the audit in a child process (so each size starts from a clean heap), and prints one line per size:
exchanges, capture bytes, seconds per stage, exchanges per second, and the child's peak RSS in MiB.
Bounded memory shows as a peak RSS that does not grow with the number of exchanges.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


def sample_lines() -> list[dict]:
    lines = [json.loads(l) for l in (SAMPLES / "coding-agent.jsonl").read_text(encoding="utf-8").splitlines() if l.strip()]
    with zstandard.ZstdDecompressor().stream_reader((SAMPLES / "deepseek-v31.jsonl.zst").open("rb")) as r:
        text = io.TextIOWrapper(r, encoding="utf-8").read()
    lines += [json.loads(l) for l in text.splitlines() if l.strip()]
    return lines


def write_capture(path: Path, n: int) -> int:
    base = sample_lines()
    cctx = zstandard.ZstdCompressor(level=3)
    with path.open("wb") as f, cctx.stream_writer(f) as w:
        for i in range(n):
            ex = dict(base[i % len(base)])
            ex["id"] = f"{ex['id']}-{i}"
            w.write((json.dumps(ex, ensure_ascii=False) + "\n").encode())
    return path.stat().st_size


CHILD = r"""
import json, resource, sys, time
from replay.audit import audit
from replay.runspec import AuditConfig
from replay.render import JsonToolsRenderer
cap, out, chunkings = sys.argv[1], sys.argv[2], tuple(sys.argv[3].split(","))
cfg = AuditConfig(renderer=JsonToolsRenderer(), chunkings=chunkings, options={"chunkings": list(chunkings)})
t = time.perf_counter()
res = audit([cap], out, cfg)
print(json.dumps({"seconds": res.seconds, "total": time.perf_counter() - t,
                  "exchanges": res.meta["ingest"]["exchanges"],
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, nargs="+", default=[2000, 8000])
    ap.add_argument("--chunkings", default="recorded,whole,char,fixed-2,fixed-3,fixed-5,fixed-8,fixed-13,fixed-40")
    args = ap.parse_args()
    print(f"{'exchanges':>9} {'MiB in':>7} {'ingest s':>8} {'render s':>8} {'stream s':>8} {'ex/s':>7} {'peak RSS MiB':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.exchanges:
            cap = Path(tmp) / f"cap-{n}.jsonl.zst"
            size = write_capture(cap, n)
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", CHILD, str(cap), str(Path(tmp) / f"run-{n}"), args.chunkings],
                                 check=True, capture_output=True, text=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            s = r["seconds"]
            print(f"{r['exchanges']:>9} {size / 2**20:>7.2f} {s['ingest']:>8.2f} {s['render']:>8.2f} {s['stream']:>8.2f} "
                  f"{r['exchanges'] / r['total']:>7.0f} {r['peak_rss_mib']:>12.0f}")


if __name__ == "__main__":
    main()
