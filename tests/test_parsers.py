"""Tool parsers outside the families: the incremental JSON scan and the depth rule every family
shares, the registry, plugins and the model-name map. The families' own tests (the property,
exact examples, planted bugs, long input, corpus) are the family suite, ``tests/families``."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypo import budget
from replay.parsers import (
    PARSERS,
    DeepSeekV31Parser,
    HermesParser,
    UnknownParserError,
    family_for_model,
    get_parser,
)
from replay.parsers._jsonscan import DONE, INVALID, MAX_DEPTH, TOO_DEEP, JsonPrefix, decode_at, loads_or_too_deep
from replay.parsers._markers import find_marker, first_marker
from replay.parsers._sections import Tokens
from strategies import json_values

JSON_MARKERS = ["<tool_call>", "</tool_call>", "<tool_", "</tool", "tool_call>"]


@budget(150)
@given(st.one_of(json_values(JSON_MARKERS).map(json.dumps), st.text(alphabet='{}[]",:0123456789.eE+-tfnrulsaINfy \\u', max_size=12)))
def test_json_prefix_agrees_with_raw_decode(text):
    """The streaming side's incremental JSON scan accepts exactly what json.raw_decode accepts."""
    try:
        _, expected = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        expected = None
    for cut in sorted({0, len(text) // 2, len(text)}):
        scan = JsonPrefix()
        status = scan.feed(text[:cut])
        status = scan.feed(text[cut:])
        status = scan.close()
        if text[:1] in " \t\n\r":  # raw_decode does not skip leading whitespace; the parsers do
            continue
        if expected is None:
            assert status == INVALID, (text, scan.end)
        else:
            assert status == DONE and scan.end == expected, (text, status, scan.end, expected)


KIMI_TOKENS = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>", "<|tool_call_begin|>", "<|tool_call_end|>")


@budget(150)
@given(st.lists(st.sampled_from([*KIMI_TOKENS, "<|", "<|tool_", "a", "<", "|>", "call"]), max_size=12).map("".join), st.data())
def test_tokens_find_what_first_marker_finds(text, data):
    """The section grammar's token search gives first_marker's and find_marker's answers (the
    first token, the one listed first at equal indices; the held-back suffix on a prefix)."""
    tokens = Tokens(KIMI_TOKENS)
    start = data.draw(st.integers(0, len(text)))
    stop = data.draw(st.one_of(st.none(), st.integers(start, len(text))))
    assert tokens.next(text, start, stop) == first_marker(text, KIMI_TOKENS, start, stop)
    for final in (False, True):
        assert tokens.cut(text, start, final) == find_marker(text, KIMI_TOKENS, final, start)


def test_tokens_need_a_shared_first_character():
    with pytest.raises(ValueError, match="share no first character"):
        Tokens(("<a>", "[b]"))


def _at_stack_depth(frames, f):
    return f() if frames == 0 else _at_stack_depth(frames - 1, f)


def test_depth_rule_is_the_same_at_any_stack_depth():
    """``json`` gives up at a depth that depends on the caller's stack; the shared decoders do
    not: deeper than MAX_DEPTH is TOO_DEEP (with the value's extent), called from anywhere."""
    for depth, too_deep in ((MAX_DEPTH, False), (MAX_DEPTH + 1, True), (900, True)):
        nested = "[" * depth + "]" * depth
        for frames in (0, 600):
            value, end = _at_stack_depth(frames, lambda: decode_at(nested + " x", 0))
            assert ((value is TOO_DEEP), end) == (too_deep, 2 * depth), (depth, frames)
            assert (_at_stack_depth(frames, lambda: loads_or_too_deep(nested)) is TOO_DEEP) == too_deep


# ----------------------------------------------------------------------------- registry
def test_registry_aliases():
    for alias in ("hermes", "qwen", "qwen25", "qwen3"):
        assert PARSERS[alias] is HermesParser and get_parser(alias) is HermesParser
    for alias in ("deepseek_v31", "deepseekv31", "deepseek-v3.1"):
        assert get_parser(alias) is DeepSeekV31Parser
    with pytest.raises(UnknownParserError, match="hermes"):
        get_parser("nope")
    # every family is registered under its own name, and every alias leads to a family
    from replay.parsers import families

    assert len(families()) == 17
    for cls in families():
        assert get_parser(cls.name) is cls and cls.markers and cls.covers
    assert {cls.name for cls in PARSERS.values()} == {cls.name for cls in families()}


def test_get_parser_plugin(tmp_path):
    good = tmp_path / "myparser.py"
    good.write_text("from replay.parsers.hermes import HermesParser\nclass P(HermesParser):\n    name = 'mine'\nNOT = 3\n")
    assert get_parser(f"{good}:P").name == "mine"
    with pytest.raises(UnknownParserError):
        get_parser(f"{good}:NOT")
    assert issubclass(UnknownParserError, ValueError)


@pytest.mark.parametrize(
    "model, family",
    [
        ("Qwen/Qwen2.5-7B-Instruct", "hermes"),
        ("Qwen/Qwen3-8B", "hermes"),
        ("qwen3-235b-a22b-instruct-2507", "hermes"),
        ("Qwen/QwQ-32B", "hermes"),
        ("NousResearch/Hermes-3-Llama-3.1-8B", "hermes"),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_coder"),
        ("Qwen/Qwen3.5-4B", "qwen3_coder"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek_v31"),
        ("deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek_v31"),
        ("deepseek-v3.1", "deepseek_v31"),
        ("deepseek-ai/DeepSeek-V3", "deepseek_v3"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek_v3"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "deepseek_v3"),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek_v32"),
        ("deepseek-ai/DeepSeek-V4", "deepseek_v32"),
        ("moonshotai/Kimi-K2-Instruct", "kimi_k2"),
        ("moonshotai/Kimi-K2-Thinking", "kimi_k2"),
        ("zai-org/GLM-4.6", "glm45"),
        ("zai-org/GLM-4.5-Air", "glm45"),
        ("THUDM/glm-4-9b-chat", None),
        ("openai/gpt-oss-20b", "harmony"),
        ("google/gemma-4-31b-it", "gemma4"),
        ("google/gemma-2-2b-it", None),
        ("MiniMaxAI/MiniMax-M2", "minimax_m2"),
        ("ByteDance-Seed/Seed-OSS-36B-Instruct", "seed_oss"),
        ("ibm-granite/granite-3.3-8b-instruct", "granite"),
        ("ibm-granite/granite-4.0-h-small", "granite4"),
        ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistral"),
        ("mistralai/Devstral-Small-2507", "mistral"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3_json"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama3_json"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "pythonic"),
        ("LiquidAI/LFM2-8B-A1B", "pythonic"),
        ("gpt-4o", None),
        (None, None),
    ],
)
def test_family_for_model(model, family):
    assert family_for_model(model) == family
