"""The shared steps of the release tests of ``replay repro`` (tests/test_repro_sglang.py,
tests/test_repro_vllm.py): one public bug audited with the faulty release as old (and the fixed one
as new), shrunk, written and proven."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from replay.cli import app
from replay.repro.run import repro
from strategies import PUBLIC_BUGS
from tests.writers.public_bugs import write_public_bugs_capture


def audit_and_repro(framework: str, label: str, bug: str, case: tuple, pythons: dict[str, str], tmp_path: Path) -> tuple[Any, str]:
    """Audit public bug ``bug`` with ``parser=<framework>/<name>`` in the faulty release's
    interpreter as old and, when ``case`` names one, the fixed release's as new; run ``repro`` on
    it; assert the shrunk sizes (``case``: ``(name, broken, fixed, check, (chars before, after,
    marker chars), deltas)``), the proofs (fails on the broken release, passes on the fixed side),
    the releases named by ``label`` (``SGLang``, ``vLLM``) and no local path in the file. Returns
    ``(the repro result, the first written file's text)``."""
    name, broken, fixed, check, chars, deltas = case
    capture = write_public_bugs_capture(PUBLIC_BUGS, tmp_path / "cap.jsonl", ids=[bug])
    args = ["audit", str(capture), "--out", str(tmp_path / "run"), "--quiet", "--jobs", "1",
            "--old", f"python={pythons[broken]},parser={framework}/{name}", "--chunkings", "recorded,whole,char,fixed-40"]
    if fixed is not None:
        args += ["--new", f"python={pythons[fixed]},parser={framework}/{name}"]
    got = CliRunner().invoke(app, args)
    assert got.exit_code == 0, got.output
    r = repro(tmp_path / "run", bug, check, side="old", fixed="new" if fixed else "reference", out=tmp_path / "repro")
    sizes = r.shrunk.sizes()
    assert (sizes["chars"][0], sizes["chars"][1], r.marker_chars()) == chars and tuple(sizes["deltas"]) == deltas
    assert r.broken_proof.failed and r.fixed_proof.passed
    assert f"{label} {broken}" in r.broken and (f"{label} {fixed}" in r.fixed if fixed else r.fixed.startswith("built-in"))
    src = r.files[0].read_text(encoding="utf-8")
    assert f"Broken: {framework}/{name} ({label} {broken})." in src and str(pythons[broken]) not in src  # releases, not local paths
    return r, src
