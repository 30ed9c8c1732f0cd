"""Peak memory of ingest on one very long line (a capture whose line never ends, a log gone wrong).

Run: ``python benchmarks/bench_long_line.py [--mib 100] [--limits 32 256]``

Writes a capture of a good line, one line of ``--mib`` MiB (a JSON string that never closes), and a
good line, plain and ``.zst``; ingests each in a child process (a clean heap) once per
``--max-line-bytes`` limit in ``--limits`` (MiB), and prints seconds, the child's peak RSS (MiB),
and the ingest counts. Under the default 32 MiB limit the long line is read past in blocks (peak
about the limit, not the line); with a limit above the line's size it is held, joined and parsed,
which is what the limit prevents. A baseline row ingests the two good lines alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import zstandard

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from bad_inputs import good  # noqa: E402

CHILD = r"""
import json, resource, sys, time
from replay.capture import ingest
cap, out, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = time.perf_counter()
stats = ingest([cap], out, max_line_bytes=limit)
print(json.dumps({"seconds": time.perf_counter() - t, "exchanges": stats.exchanges,
                  "errors": stats.errors_by_reason,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write(path: Path, mib: int, compress: bool) -> None:
    head = orjson.dumps(good(1)) + b"\n" + b'{"id": "long", "request": {"messages": [{"role": "user", "content": "'
    tail = b"\n" + orjson.dumps(good(2)) + b"\n"
    block = b"x" * (1 << 20)
    with path.open("wb") as raw:
        w = zstandard.ZstdCompressor(level=3).stream_writer(raw) if compress else raw
        w.write(head)
        for _ in range(mib):
            w.write(block)
        w.write(tail)
        if compress:
            w.close()


def run(cap: Path, out: Path, limit: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(cap), str(out), str(limit)], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=100, help="size of the long line (MiB)")
    ap.add_argument("--limits", type=int, nargs="+", default=[32, 256], help="--max-line-bytes values to try (MiB)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        base = d / "base.jsonl"
        base.write_bytes(orjson.dumps(good(1)) + b"\n" + orjson.dumps(good(2)) + b"\n")
        r = run(base, d / "out-base", 32 << 20)
        print(f"{'baseline (2 short lines)':<34} {r['seconds']:6.2f} s  peak {r['peak_rss_mib']:7.1f} MiB  {r['exchanges']} exchanges {r['errors']}")
        for compress in (False, True):
            cap = d / ("long.jsonl.zst" if compress else "long.jsonl")
            write(cap, args.mib, compress)
            for limit in args.limits:
                r = run(cap, d / f"out-{compress}-{limit}", limit << 20)
                label = f"{args.mib} MiB line, {cap.suffix[1:]}, limit {limit} MiB"
                print(f"{label:<34} {r['seconds']:6.2f} s  peak {r['peak_rss_mib']:7.1f} MiB  {r['exchanges']} exchanges {r['errors']}")


if __name__ == "__main__":
    main()
