"""Rendering cases of ../shared/cases/public-bugs.jsonl: the serializer that fixes the bug passes,
and the faulty behaviour the report describes is flagged by the null-leak check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strategies import SHARED

from replay.render import JsonToolsRenderer
from replay.tools import get_serializer, leaked_nulls

CASES = SHARED / "cases" / "public-bugs.jsonl"


def case(case_id: str) -> dict:
    if not CASES.is_file():
        pytest.skip(f"no {CASES}")
    for line in CASES.read_text(encoding="utf-8").splitlines():
        c = json.loads(line)
        if c["id"] == case_id:
            return c
    pytest.skip(f"no case {case_id}")


def test_b33_tool_without_parameters_or_with_nulls():
    """ollama-python#733 / a vLLM 0.19 deployment rejecting null description: a tool with no
    parameters (and one with explicit nulls) must serialize and render without writing nulls."""
    c = case("B33")
    tools = c["input"]["tools"]
    not_contains = c["expected"]["serialized_not_contains"]
    fixed = [get_serializer("exclude-none")(t) for t in tools]
    rendered = JsonToolsRenderer().render([], fixed)
    assert all(s not in rendered for s in not_contains)
    # the faulty serializers write the nulls; for the tool the client sent without them that is a leak
    leaks = {}
    for name in ("model-dump", "client-fields"):
        ser = get_serializer(name)
        out = [ser(t) for t in tools]
        assert any(s in JsonToolsRenderer().render([], out) for s in not_contains), name
        leaks[name] = [leaked_nulls(t, o) for t, o in zip(tools, out)]
    # f was sent without nulls: every null written for it is a leak; g wrote description and
    # parameters null itself, so only the strict that model-dump adds is one
    assert leaks["model-dump"] == [
        ["$.function.description", "$.function.parameters", "$.function.strict"],
        ["$.function.strict"],
    ]
    assert leaks["client-fields"] == [["$.function.parameters"], []]
