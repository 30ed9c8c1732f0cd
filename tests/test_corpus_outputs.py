"""Raw outputs collected from public parser test suites (../shared/corpus/outputs), for the
families without a test module of their own (Hermes, DeepSeek V3.1); see
:func:`strategies.check_corpus_records`."""

from __future__ import annotations

import pytest

from replay.parsers import DeepSeekV31Parser, HermesParser
from replay.parsers.deepseek_v31 import CALL_BEGIN
from strategies import check_corpus_records

#: records checked per file (complete calls in the family's own syntax); a drop means a regression
CHECKED = {"hermes.jsonl": 21, "deepseek_v3_1.jsonl": 7}
FILES = {"hermes.jsonl": (HermesParser, "<tool_call>"), "deepseek_v3_1.jsonl": (DeepSeekV31Parser, CALL_BEGIN)}


def not_own_syntax(start_marker):
    """Skip the records not written in the family's own call syntax (llama.cpp's lenient Hermes
    reader also accepts <function=...>, <tool>, fenced or bare JSON; those forms are not the
    family's output syntax)."""
    return lambda rec: None if start_marker in rec["text"] else "not the family's call syntax"


@pytest.mark.parametrize("fname", sorted(FILES))
def test_corpus_records(fname):
    parser_cls, start = FILES[fname]
    check_corpus_records(parser_cls, fname, CHECKED[fname], skip=not_own_syntax(start), calls_only=True)
