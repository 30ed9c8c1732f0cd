"""Per-chunking throughput of every built-in tool parser, and its time on a 1 MB unterminated call.

Run: ``python benchmarks/bench_parsers.py [--repeat 20] [--families hermes,kimi_k2]``

Inputs per family: the raw completions of the bundled samples (``samples/``, grouped by the family
the model name maps to) and the model outputs of the conformance cases (``tests/conformance/*.jsonl``,
by their ``family``), and, when the shared corpus is beside the checkout, the llama.cpp records the
conformance table reads (``../shared/corpus/outputs``), so every family has inputs (Granite 4 has
none of its own: it is Hermes under another name). For each family and chunking it replays every completion ``--repeat`` times
and prints thousands of chars per CPU second (``time.process_time``: user+sys of this process, so
other load on a shared machine counts less than in wall time; whole-text parse: chunking ``parse``). The last column
streams a 1 MB call that never ends (the family's call opening followed by 1 MB of argument text)
under ``fixed-40`` (25,000 deltas) and prints the CPU seconds it took: a parser that rescans its buffer per delta or
backtracks shows there as seconds instead of milliseconds.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import zstandard

from replay.parsers import PARSERS, family_for_model
from replay.stream import replay_stream, split

ROOT = Path(__file__).resolve().parents[1]
CHUNKINGS = ("parse", "whole", "fixed-40", "fixed-8", "fixed-2", "char")


def sample_outputs() -> dict[str, list[str]]:
    """``{family: [raw completion, ...]}`` from every capture in ``samples/`` and every conformance case."""
    out: dict[str, list[str]] = defaultdict(list)
    for path in sorted((ROOT / "samples").glob("*.jsonl*")):
        raw = path.read_bytes()
        if path.suffix == ".zst":
            raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)).read()
        for line in raw.splitlines():
            try:
                ex = json.loads(line)
            except ValueError:
                continue
            text = (ex.get("server") or {}).get("output_text") if isinstance(ex, dict) else None
            family = family_for_model(ex.get("model")) if isinstance(ex, dict) else None
            if text and family:
                out[family].append(text)
    for path in sorted((ROOT / "tests" / "conformance").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            case = json.loads(line) if line.strip() else None
            if case and case.get("text") and case.get("family"):
                out[case["family"]].append(case["text"])
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.conformance.table import LLAMA_FORMATS, SHARED_OUTPUTS

    for fname, family in sorted(LLAMA_FORMATS.items()):
        path = SHARED_OUTPUTS / fname
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                rec = json.loads(line) if line.strip() else None
                if rec and rec.get("text"):
                    out[family].append(rec["text"])
    return out


def unterminated(cls: type, size: int = 1 << 20) -> str:
    """A call opening (the family's first marker) followed by ``size`` chars of argument text."""
    opening = cls.markers[0] if cls.markers else ""
    return opening + '{"name": "f", "arguments": {"x": "' + "a" * size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--families", default="")
    args = ap.parse_args()
    outputs = sample_outputs()
    classes = {cls.name: cls for cls in PARSERS.values()}
    wanted = [f for f in (args.families.split(",") if args.families else sorted(classes)) if f in classes]
    print(f"{'family':<14} {'outputs':>7} " + " ".join(f"{c:>9}" for c in CHUNKINGS) + f" {'1MB unterminated s':>19}")
    print(f"{'':<14} {'':>7} " + " ".join(f"{'kchar/cpu-s':>9}" for _ in CHUNKINGS))
    for fam in wanted:
        cls = classes[fam]
        texts = outputs.get(fam, [])
        cells = []
        for chunking in CHUNKINGS:
            if not texts:
                cells.append(f"{'-':>9}")
                continue
            chars = sum(len(t) for t in texts) * args.repeat
            splits = [None if chunking == "parse" else split(t, chunking, markers=cls.markers) for t in texts]
            t0 = time.process_time()
            for _ in range(args.repeat):
                for text, deltas in zip(texts, splits):
                    if deltas is None:
                        cls(None).parse(text)
                    else:
                        replay_stream(cls, None, deltas)
            cells.append(f"{chars / (time.process_time() - t0) / 1000:>9.0f}")
        big = unterminated(cls)
        t0 = time.process_time()
        cls(None).parse(big)
        replay_stream(cls, None, split(big, "fixed-40", markers=cls.markers))
        print(f"{fam:<14} {len(texts):>7} " + " ".join(cells) + f" {time.process_time() - t0:>19.2f}")


if __name__ == "__main__":
    main()
