"""The conformance table as a test: replay's built-in parsers on the upstream tool-parser cases
(``tests/conformance/``; llama.cpp's from the shared corpus), whole-text and streamed.

Every case agrees with its upstream expectation except the ones :data:`KNOWN` names, each with
the reason: a documented choice of the family (its module docstring says what vLLM / SGLang /
llama.cpp do and why replay differs) or a test that does not judge the format (a client option of
llama.cpp's test). The test fails on any new disagreement, and on a known one that now agrees
(the list must shrink with the fixes). ``python -m tests.conformance.table`` prints the table.
"""

from __future__ import annotations

import json

import pytest

from conformance.table import HERE, LLAMA_FORMATS, SHARED_OUTPUTS, load_cases, run_case, table

NONE = "llama.cpp test with reasoning_format none: the expected content keeps the reasoning and its tags (a client option of the test, not the format; replay always splits reasoning)"
LENIENT_HERMES = "llama.cpp's Hermes reader also takes <function=...>, <tool>, <tools>, <response>, <json>, <xml>, fenced and bare JSON calls; replay reads the family's <tool_call> syntax only (hermes docstring)"
UNDECLARED = "SGLang and TensorRT-LLM drop a call to an undeclared tool; replay reports it, an audit must see it (hermes, glm45, pythonic docstrings)"
PY_PROSE = "SGLang's PythonicDetector takes a bare [call(...)] list after prose; replay, as vLLM, takes a bare list only at the start of the reply (pythonic docstring)"
LFM2_JSON = "SGLang's Lfm2Detector also reads JSON calls between the LFM2 markers; replay reads the Pythonic list LFM2's template asks for (pythonic docstring)"
QWEN_NO_START = "vLLM's Qwen3-Coder parser falls back to <function=...> without <tool_call>; replay needs <tool_call> (qwen3_coder docstring)"
BUILTIN = "Llama 3.1 built-in tool syntax <|python_tag|>NAME.call(...): llama.cpp only, not vLLM/SGLang llama3_json (llama3_json docstring)"

#: case id -> why replay's parse differs from the upstream expectation
KNOWN: dict[str, str] = {
    "vllm-qwen3_coder-013": QWEN_NO_START,
    "vllm-qwen3_coder-020": QWEN_NO_START,
    "vllm-mistral-009": "vLLM's pre-v11 regex fallback finds a JSON list after junk text; replay: a block whose JSON does not follow [TOOL_CALLS] is content (mistral docstring)",
    "vllm-mistral-010": "vLLM drops [TOOL_CALLS] from the content of a block that is no call; replay keeps such a block verbatim (mistral docstring)",
    "vllm-mistral-015": "a v11 name with no arguments: vLLM drops the text (no call, content None); replay keeps it as content (mistral docstring)",
    "sglang-pythonic-002": PY_PROSE,
    "sglang-pythonic-003": PY_PROSE,
    "sglang-pythonic-004": PY_PROSE,
    "sglang-pythonic-007": PY_PROSE,
    "sglang-pythonic-011": PY_PROSE,
    "sglang-pythonic-021": LFM2_JSON,
    "sglang-pythonic-022": LFM2_JSON,
    "sglang-pythonic-023": LFM2_JSON,
    "sglang-pythonic-028": LFM2_JSON,
    "sglang-pythonic-029": LFM2_JSON,
    "sglang-pythonic-030": LFM2_JSON,
    "sglang-pythonic-025": UNDECLARED,
    "sglang-glm45-006": UNDECLARED,
    "sglang-glm45-015": UNDECLARED,
    "trtllm-hermes-010": UNDECLARED,
    "sglang-llama3_json-005": "SGLang retries at the next '{' after a malformed object; replay: a '{' in the middle of prose is never a call (llama3_json docstring)",
    **{f"llama.cpp-hermes-{n:03d}": LENIENT_HERMES for n in (*range(42, 58), 60)},
    **{i: NONE for i in (
        "llama.cpp-hermes-062", "llama.cpp-hermes-065", "llama.cpp-hermes-067", "llama.cpp-qwen3_coder_xml-002",
        "llama.cpp-qwen3_coder_xml-024", "llama.cpp-mistral-002", "llama.cpp-deepseek_r1_v3-018", "llama.cpp-deepseek_r1_v3-021",
        "llama.cpp-deepseek_r1_v3-024", "llama.cpp-deepseek_v3_1-009", "llama.cpp-gpt_oss_harmony-004",
        "llama.cpp-gpt_oss_harmony-031", "llama.cpp-gpt_oss_harmony-032", "llama.cpp-gemma4-004", "llama.cpp-granite-009",
        "llama.cpp-granite-012",
    )},
    "llama.cpp-llama3_json-008": "llama.cpp continuation test: the expected content includes the prefilled text, which is not in this output",
    "llama.cpp-llama3_json-009": BUILTIN,
    "llama.cpp-llama3_json-010": BUILTIN,
    "llama.cpp-lfm2_pythonic-010": "llama.cpp keeps the escape \\n of a Python string literal as two characters; replay decodes Python escapes as ast.literal_eval does (vLLM, SGLang) (pythonic docstring)",
    "llama.cpp-mistral-007": "json_schema response format: llama.cpp strips the ```json fence from content; replay keeps content verbatim (mistral docstring)",
    "llama.cpp-deepseek_r1_v3-025": "llama.cpp's lenient reader: <｜tool▁calls｜> with no <｜tool▁call▁begin｜> is not the family's syntax (deepseek_v3 docstring)",
    "llama.cpp-kimi_k2-012": "llama.cpp's lenient reader: calls without <|tool_call_end|> followed by another <|tool_call_begin|> (kimi_k2 docstring)",
    "llama.cpp-kimi_k2-013": "llama.cpp takes a last call whose <|tool_call_end|> never came; vLLM's and SGLang's whole-text regexes need it, and so does replay (a call cut off by the end of output is no call: README content rules, kimi_k2 docstring)",
    "llama.cpp-gpt_oss_harmony-030": "llama.cpp's test context (no tools / tool_choice none) drops the call; the format has it (same text agrees in another record)",
    "llama.cpp-granite-023": "llama.cpp's generic JSON fallback ({\"tool_calls\": [...]}), not Granite syntax (granite docstring)",
}

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


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_conformance_case(case):
    """The case agrees with its upstream expectation, whole-text and under every streamed
    chunking, unless :data:`KNOWN` documents why not; a known case must still disagree."""
    outcome = run_case(case)
    if case["id"] in KNOWN:
        assert not outcome.agrees, f"{case['id']} now agrees: drop it from KNOWN ({KNOWN[case['id']]})"
        return
    assert outcome.agrees, f"{case['id']} ({case.get('test') or case.get('cite')}): {(outcome.whole + outcome.stream)[:3]}"


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
