"""The upstream conformance cases replay's parsers disagree with on purpose: case id -> why (a
documented choice of the family, whose module docstring says what vLLM / SGLang / llama.cpp do
and why replay differs, or a test that does not judge the format). Read by the family suite
(``tests/families``, which runs every case) and ``tests/test_conformance.py``."""

from __future__ import annotations

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
