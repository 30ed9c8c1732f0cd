"""What redaction costs at ingest: seconds to ingest generated captures with the secret scrub turned
off, on (the default), and with ``--redact``.

Run: ``python benchmarks/bench_redact.py [--exchanges 4000] [--repeat 3]``

The capture is the bundled samples repeated (as ``bench_audit.py`` writes it). "off" replaces
:func:`replay.capture.redact.redact_exchange` with a no-op (never an option of the tool: it only
measures the cost). Prints the median of ``--repeat`` runs and exchanges per second.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_audit import write_capture  # noqa: E402

import replay.capture.redact as redact  # noqa: E402
from replay.capture import ingest  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    real = redact.redact_exchange
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cap = d / "c.jsonl.zst"
        write_capture(cap, args.exchanges)
        for label, fn, hashed in (("scrub off", lambda *a, **k: None, False), ("default", real, False), ("--redact", real, True)):
            redact.redact_exchange = fn
            times = []
            for i in range(args.repeat):
                t = time.perf_counter()
                ingest([cap], d / f"out-{label}-{i}", redact=hashed)
                times.append(time.perf_counter() - t)
            med = statistics.median(times)
            print(f"{label:10} {med:6.2f} s  {args.exchanges / med:7.0f} exchanges/s")
        redact.redact_exchange = real


if __name__ == "__main__":
    main()
