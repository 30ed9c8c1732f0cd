"""``replay repro`` on real vLLM releases (opt-in: ``python -m pytest -m engines
tests/test_repro_vllm.py``): public bugs (``../shared/cases/public-bugs.jsonl``, captured by
tests/writers/public_bugs.py) each audited with the faulty release as the old side, shrunk,
written as a vLLM-style test (the parser class from ``ToolParserManager``, the deltas fed to
``extract_tool_calls_streaming``, a tokenizer built offline with the family's markers) and
proven: it fails in the faulty release's venv and passes on the side without the fault (0.33.0's
venv, or the built-in parser where 0.33.0 has the fault too). docs/repro.md lists the results.

The two venvs (about 2.2 GB each) are built on first use by tests/engines.py and cached; skips
when they cannot be built or ``../shared`` is absent. Run with ``HF_HUB_OFFLINE=1``: the written
file downloads nothing.
"""

from __future__ import annotations

import ast

import pytest

from engines import EngineBuildError, engine_python
from repro_releases import audit_and_repro
from strategies import PUBLIC_BUGS

pytestmark = pytest.mark.engines

#: id -> (vLLM parser name, faulty release, fixed release or None: the built-in parser, check,
#: (captured chars, shrunk chars, shrunk chars in family markers), (captured deltas, shrunk deltas))
BUGS = {
    "B04": ("hermes", "0.11.0", "0.33.0", "dropped-call", (66, 61, 23), (1, 1)),
    "B12": ("kimi_k2", "0.11.0", "0.33.0", "dropped-call", (273, 213, 156), (1, 1)),
    "B14": ("glm45", "0.11.0", "0.33.0", "argument-mismatch", (90, 77, 65), (1, 1)),
    # 0.33.0's Mistral parser is engine-based: its last call comes out of the finishing step
    "B43": ("mistral", "0.11.0", "0.33.0", "dropped-call", (110, 68, 24), (1, 1)),
    # 0.33.0 too: its whole-text parse drops the call (a literal </tool_call> inside an argument);
    # no streamed chunking shows it, so the file tests extract_tool_calls
    "B41": ("hermes", "0.33.0", None, "dropped-call", (177, 127, 46), (1, 1)),
}

#: Bugs whose failure the run finds in the side's whole-text parse only: their file tests that.
WHOLE = {"B41"}


@pytest.fixture(scope="module")
def pythons() -> dict[str, str]:
    if not PUBLIC_BUGS.exists():
        pytest.skip(f"no {PUBLIC_BUGS}")
    try:
        return {v: str(engine_python(f"vllm=={v}")) for v in ("0.11.0", "0.33.0")}
    except EngineBuildError as exc:
        pytest.skip(f"cannot build the vLLM venvs here: {exc}")


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_repro_fails_on_the_faulty_release_and_passes_without_the_fault(bug, pythons, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the written file must build its tokenizer without the hub
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "error")
    r, src = audit_and_repro("vllm", "vLLM", bug, BUGS[bug], pythons, tmp_path)
    tree = ast.parse(src)
    # vLLM's suite style: module-level fixtures and one test function, the parser from ToolParserManager
    tests = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    assert tests == (["test_whole_text_calls"] if bug in WHOLE else ["test_streaming_calls"]) and "pytestmark = pytest.mark.cpu_test" in src
    call = "parser.extract_tool_calls(TEXT" if bug in WHOLE else "parser.extract_tool_calls_streaming("
    assert "ToolParserManager.get_tool_parser(PARSER)" in src and call in src
    assert "get_tokenizer(" not in src  # a model name would be a download: the tokenizer is built in the file
    assert len(r.files) == (1 if BUGS[bug][2] else 2)  # the built-in side gets a protocol-style file of the same case
