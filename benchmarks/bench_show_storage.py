"""What storing the prompt texts would cost in run size, against `replay show` re-rendering them.

Run: ``python benchmarks/bench_show_storage.py [--exchanges 2000]``

Writes the scale benchmark's capture (bench_audit.write_capture: the bundled samples repeated with
fresh ids), audits it (chunking ``whole``), re-renders every exchange's prompts through the render
stage's own ``render_rows`` (as ``replay show`` does for one) and prints the run folder's size, the
zstd-compressed size of the distinct prompt texts (deduplicated by SHA-256: what a prompts table
would hold), and, for comparison, of every prompt without deduplication.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_audit import write_capture  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=2000)
    args = ap.parse_args()
    from replay.audit import audit
    from replay.runner.driver import iter_exchanges
    from replay.stages.context import stage_context
    from replay.stages.render import RENDER_COLUMNS
    from replay.render.exchange import render_rows
    from replay.runspec import RunSpec, build_config

    with tempfile.TemporaryDirectory() as tmp:
        cap = Path(tmp) / "cap.jsonl.zst"
        write_capture(cap, args.exchanges)
        out = Path(tmp) / "run"
        spec = RunSpec(chunkings=("whole",))
        audit([cap], out, build_config(spec))
        run_bytes = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        ctx = stage_context(spec)
        distinct: dict[str, str] = {}
        every: list[str] = []
        for ex in iter_exchanges(out, RENDER_COLUMNS, 512):
            prompts: dict[str, str] = {}
            render_rows(ex, ctx.cfg, ctx.sides.serializers, prompts=prompts)
            for text in prompts.values():
                every.append(text)
                distinct.setdefault(hashlib.sha256(text.encode()).hexdigest(), text)
        z = zstandard.ZstdCompressor(level=3)
        dedup = len(z.compress("\x00".join(distinct.values()).encode()))
        full = len(z.compress("\x00".join(every).encode()))
        print(f"exchanges {args.exchanges:,}; run folder {run_bytes:,} bytes; prompts {len(every):,} ({len(distinct):,} distinct); "
              f"stored deduplicated + zstd: {dedup:,} bytes ({dedup / run_bytes:.1%} of the run); "
              f"without dedup: {full:,} bytes ({full / run_bytes:.1%}); re-rendering (replay show): 0 bytes")


if __name__ == "__main__":
    main()
