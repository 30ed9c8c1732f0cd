"""``replay repro`` on real SGLang releases: five public bugs (``../shared/cases/public-bugs.jsonl``,
captured by tests/writers/public_bugs.py) each audited with the faulty release as the old side,
shrunk, written as an SGLang-style test and proven: it fails in the faulty release's venv and
passes on the side without the fault (a later release's venv, or the built-in parser where no
release of the four tried has fixed it). docs/repro.md lists the results.

The venvs are built on first use by tests/engines.py (``--no-deps sglang==X`` and a dozen small
packages) and cached; skips when they cannot be built or ``../shared`` is absent.
"""

from __future__ import annotations

import ast

import pytest

from engines import EngineBuildError, engine_python
from repro_releases import audit_and_repro
from strategies import PUBLIC_BUGS

#: id -> (SGLang parser name, faulty release, fixed release or None: the built-in parser, check,
#: (captured chars, shrunk chars, shrunk chars in family markers), (captured deltas, shrunk deltas))
BUGS = {
    "B04": ("qwen25", "0.5.8", "0.5.18", "non-json-join", (66, 50, 11), (2, 2)),
    "B12": ("kimi_k2", "0.5.8", "0.5.23", "dropped-call", (273, 185, 128), (1, 1)),
    "B14": ("glm45", "0.5.18", "0.5.23", "argument-mismatch", (90, 77, 65), (1, 1)),
    "B18": ("gemma4", "0.5.23", None, "dropped-call", (142, 102, 56), (1, 1)),
    "B43": ("mistral", "0.5.23", None, "dropped-call", (110, 68, 24), (1, 1)),
}


@pytest.fixture(scope="module")
def pythons() -> dict[str, str]:
    if not PUBLIC_BUGS.exists():
        pytest.skip(f"no {PUBLIC_BUGS}")
    try:
        return {v: str(engine_python(f"sglang=={v}")) for v in ("0.5.8", "0.5.18", "0.5.23")}
    except EngineBuildError as exc:
        pytest.skip(f"cannot build the SGLang venvs here: {exc}")


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_repro_fails_on_the_faulty_release_and_passes_without_the_fault(bug, pythons, tmp_path):
    r, src = audit_and_repro("sglang", "SGLang", bug, BUGS[bug], pythons, tmp_path)
    tree = ast.parse(src)
    # SGLang's suite style: a TestCase whose setUp builds Tool(...Function(...)) and the detector
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert [f.name for f in cls.body if isinstance(f, ast.FunctionDef)] == ["setUp", "test_streaming_calls"]
    assert "parse_streaming_increment(delta, self.tools)" in src and "from sglang.srt.entrypoints.openai.protocol import Function, Tool" in src
    assert len(r.files) == (1 if BUGS[bug][2] else 2)  # the built-in side gets a protocol-style file of the same case
