"""Cases drawn from public bug reports: the reference parsers give the expected calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.parsers import get_parser
from replay.stream import SYNTHETIC_DEFAULT, replay_stream, same_call, split

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CASES = SHARED / "cases" / "public-bugs.jsonl"
FAMILIES = {"hermes", "deepseekv31"}


def _cases():
    if not CASES.exists():
        return []
    out = []
    for line in CASES.read_text(encoding="utf-8").splitlines():
        if line.strip():
            case = json.loads(line)
            if case.get("input", {}).get("parser") in FAMILIES:
                out.append(case)
    return out


CASE_LIST = _cases()


def _assert_expected(got_calls, expected):
    assert len(got_calls) == len(expected["tool_calls"])
    for got, want in zip(got_calls, expected["tool_calls"]):
        assert got.name == want["name"]
        assert same_call(got.arguments, json.dumps(want["arguments"]))
    if "joined_stream_arguments" in expected:
        assert [c.arguments for c in got_calls] == expected["joined_stream_arguments"]


@pytest.mark.skipif(not CASE_LIST, reason=f"no {CASES}")
@pytest.mark.parametrize("case", CASE_LIST, ids=[c["id"] for c in CASE_LIST] or None)
def test_public_bug_case(case):
    inp, expected = case["input"], case["expected"]
    parser_cls = get_parser(inp["parser"])
    text = inp["raw_output"]
    whole = parser_cls(inp.get("tools")).parse(text)
    _assert_expected(whole.calls, expected)
    chunkings = {name: split(text, name, markers=parser_cls.markers) for name in SYNTHETIC_DEFAULT}
    if inp.get("chunks") is not None:
        chunkings["recorded"] = split(text, "recorded", steps=inp["chunks"])
    for name, deltas in chunkings.items():
        got = replay_stream(parser_cls, inp.get("tools"), deltas)
        _assert_expected(got.calls, expected)
        assert got.finish_reason == expected.get("finish_reason", "tool_calls"), name
