"""The conformance table as a test: replay's built-in parsers on the upstream tool-parser cases
(``tests/conformance/``; llama.cpp's from the shared corpus), whole-text and streamed.

Every case agrees with its upstream expectation except the ones :data:`KNOWN` names, each with
the reason: a documented choice of the family (its module docstring says what vLLM / SGLang /
llama.cpp do and why replay differs) or a test that does not judge the format (a client option of
llama.cpp's test). The test fails on any new disagreement, and on a known one that now agrees
(the list must shrink with the fixes). ``python -m tests.conformance.table`` prints the table.
The cases themselves run in the family suite (``tests/families/test_families.py``
``test_conformance_case``); this module checks the case files, :data:`KNOWN` and the table.
"""

from __future__ import annotations

import json

import pytest

from conformance.known import KNOWN
from conformance.table import HERE, LLAMA_FORMATS, SHARED_OUTPUTS, load_cases, table

CASES = load_cases()


def _ids(cases):
    return [c["id"] for c in cases]


def test_case_files_are_well_formed():
    """Every transcribed case has the fields the table reads, an id unique over all sources, a
    citation (repository, path, commit, test) and a known family; arguments are JSON values."""
    from replay.parsers import PARSERS

    ids = _ids(CASES)
    assert len(ids) == len(set(ids))
    transcribed = [c for c in CASES if c["source"] != "llama.cpp"]
    assert len(transcribed) >= 170
    for c in transcribed:
        assert {"repo", "path", "commit", "test", "family", "text", "expected"} <= set(c), c["id"]
        assert len(c["commit"]) == 40 and c["family"] in PARSERS, c["id"]
        for call in c["expected"]["calls"]:
            json.dumps(call["arguments"])


def test_known_exceptions_name_real_cases():
    """A documented exception names a case that exists (when its source is present)."""
    ids = set(_ids(CASES))
    present = {c["source"] for c in CASES}
    stale = [i for i in KNOWN if i.split("-")[0] in present and i not in ids]
    assert not stale, stale


def test_table_renders_every_source():
    """The markdown table has a row per family and a column per source present, and the totals
    count every case."""
    from conformance.table import run_all

    outcomes = run_all(CASES)
    text = table(outcomes)
    assert f"| all | {len(CASES)} |" in text
    for src in {c["source"] for c in CASES}:
        assert f"| {src} |" in text
    if SHARED_OUTPUTS.is_dir():
        assert {c["family"] for c in CASES if c["source"] == "llama.cpp"} <= set(LLAMA_FORMATS.values())
    assert (HERE / "README.md").exists()
