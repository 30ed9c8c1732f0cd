"""``replay matrix`` across two real vLLM releases (0.11.0, 0.33.0) and the built-in parser, on a
capture of the public bugs (tests/writers/public_bugs.py from ../shared/cases/public-bugs.jsonl).

Opt-in (the ``engines`` marker: ``python -m pytest -m engines tests/test_matrix_vllm.py``): each
vLLM venv is about 2.2 GB (tests/engines.py builds it on first use and caches it). A vLLM side is
one parser, ``parser = "vllm/NAME"`` (there is no per-family ``parser = "vllm"``), so each family
is its own matrix over that family's bugs: Hermes, Kimi K2, GLM-4.5 and Mistral here (the four
families whose faults docs/matrix.md and docs/repro.md cite; the table of every family is in
docs/matrix.md). Asserted per fault: the side where it first appears, where it goes away, and the
sides that get it wrong, as this run finds them. Skips when the venvs cannot be built or
../shared is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from engines import EngineBuildError, engine_python
from replay.cli import app
from replay.matrix import matrix_connect
from replay.sql import run_query

pytestmark = pytest.mark.engines

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT.parent / "shared" / "cases" / "public-bugs.jsonl"
RELEASES = ("0.11.0", "0.33.0")
SIDES = (*RELEASES, "built-in")
runner = CliRunner()

#: vLLM parser name -> (bug ids, {(check, bug): (appears, goes away, wrong on)}) for the faults
#: asserted; a fault not listed must not be there (the whole set of faults is compared).
FAMILIES = {
    "hermes": (["B04", "B05", "B41"], {
        **{(c, b): ("0.11.0", "0.33.0", ["0.11.0"]) for b in ("B04", "B05") for c in ("dropped-call", "non-json-join", "finish-reason", "streaming-fault")},
        **{(c, "B41"): ("0.11.0", "built-in", ["0.11.0", "0.33.0"]) for c in ("dropped-call", "non-json-join", "content-leak", "streaming-fault", "semantic-diff")},
        ("finish-reason", "B41"): ("0.11.0", "0.33.0", ["0.11.0"]),
    }),
    "kimi_k2": (["B12", "B39"], {
        **{(c, b): ("0.11.0", "0.33.0", ["0.11.0"]) for b in ("B12", "B39") for c in ("dropped-call", "non-json-join", "finish-reason", "streaming-fault")},
        **{(c, "B12"): ("0.11.0", "0.33.0", ["0.11.0"]) for c in ("argument-mismatch", "semantic-diff")},
    }),
    "glm45": (["B14"], {(c, "B14"): ("0.11.0", "0.33.0", ["0.11.0"]) for c in ("argument-mismatch", "call-id", "streaming-fault")}),
    "mistral": (["B43"], {(c, "B43"): ("0.11.0", "0.33.0", ["0.11.0"]) for c in ("dropped-call", "content-leak", "streaming-fault", "semantic-diff")}),
}


@pytest.fixture(scope="module")
def pythons() -> dict[str, Path]:
    if not CASES.is_file():
        pytest.skip(f"no {CASES}")
    try:
        return {r: engine_python(f"vllm=={r}") for r in RELEASES}
    except EngineBuildError as exc:
        pytest.skip(f"cannot build the vLLM venvs here: {exc}")


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_where_each_fault_appears_and_goes_away(name, pythons, tmp_path):
    from writers.public_bugs import write_public_bugs_capture

    bugs, expected = FAMILIES[name]
    capture = write_public_bugs_capture(CASES, tmp_path / "bugs.jsonl", ids=bugs)
    sides = tmp_path / "sides.toml"
    sides.write_text("".join(f'[sides."{r}"]\nparser = "vllm/{name}"\npython = "{pythons[r]}"\n\n' for r in RELEASES)
                     + '[sides."built-in"]\n', encoding="utf-8")
    out = tmp_path / "m"
    result = runner.invoke(app, ["matrix", str(capture), "--sides", str(sides), "--out", str(out), "-q"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    con = matrix_connect(out, list(SIDES), RELEASES[0])
    try:
        got = {(f["check"], f["exchange_id"]): (f["appears"], f["goes_away"], list(f["wrong_sides"]))
               for f in run_query(con, "matrix_faults").to_pylist()}
    finally:
        con.close()
    assert got == expected
