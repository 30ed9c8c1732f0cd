"""Raw outputs collected from public parser test suites (../shared/corpus/outputs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.parsers import DeepSeekV31Parser, HermesParser
from replay.parsers.deepseek_v31 import CALL_BEGIN
from replay.stream import replay_stream, same_call, split, two_way_splits

OUTPUTS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "outputs"
#: records checked per file (complete calls in the family's own syntax); a drop means a regression
CHECKED = {"hermes.jsonl": 21, "deepseek_v3_1.jsonl": 7}
FILES = {"hermes.jsonl": (HermesParser, "<tool_call>"), "deepseek_v3_1.jsonl": (DeepSeekV31Parser, CALL_BEGIN)}


def _records(fname):
    path = OUTPUTS / fname
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def asserted(record, start_marker):
    """Records whose calls the parser must find: complete (not partial), with parsed arguments,
    and written in the family's own call syntax (llama.cpp's lenient Hermes reader also accepts
    <function=...>, <tool>, fenced or bare JSON; those forms are not the family's output syntax)."""
    calls = record.get("expected_calls") or []
    return (
        bool(calls)
        and all("arguments" in c for c in calls)
        and not record.get("partial", False)
        and start_marker in record["text"]
    )


def reasoning_open(record):
    """The prompt opened the reasoning section: the template context says thinking is on, or the
    text closes a section it never opened."""
    text = record["text"]
    ctx = record.get("test_context") or {}
    return ctx.get("enable_thinking") == "true" or ("</think>" in text and "<think>" not in text)


@pytest.mark.parametrize("fname", sorted(FILES))
def test_corpus_records(fname):
    records = _records(fname)
    if not records:
        pytest.skip(f"no {OUTPUTS / fname}")
    parser_cls, start = FILES[fname]
    checked = 0
    for rec in records:
        text = rec["text"]
        ro = reasoning_open(rec)
        whole = parser_cls(reasoning_open=ro).parse(text)  # every record parses without exception
        replay_stream(parser_cls, None, split(text, "char", markers=parser_cls.markers), reasoning_open=ro)
        if not asserted(rec, start):
            continue
        checked += 1
        expected = rec["expected_calls"]
        runs = [whole]
        for name in ("whole", "char"):
            runs.append(replay_stream(parser_cls, None, split(text, name, markers=parser_cls.markers), reasoning_open=ro))
        runs += [replay_stream(parser_cls, None, d, reasoning_open=ro) for _, d in two_way_splits(text, parser_cls.markers)]
        for run in runs:
            assert [c.name for c in run.calls] == [c["name"] for c in expected], rec["source"]
            for got, want in zip(run.calls, expected):
                assert same_call(got.arguments, json.dumps(want["arguments"])), rec["source"]
            if rec.get("expected_reasoning") is not None:
                assert run.reasoning.strip() == rec["expected_reasoning"].strip(), rec["source"]
    assert checked == CHECKED[fname]
