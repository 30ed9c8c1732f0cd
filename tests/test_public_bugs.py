"""Cases drawn from public bug reports: the reference parsers give the expected calls.

Hermes, DeepSeek V3 / V3.1 / V3.2 and Pythonic here; the other families check their cases in their
own test modules, all with :func:`strategies.check_public_bug_cases`. :func:`test_cases_on_names_
ids_typing_string_arguments_end_tokens` names the cases of those topics (issue 10) one by one.
"""

from __future__ import annotations

import json

import pytest

from replay.parsers import DeepSeekV3Parser, DeepSeekV31Parser, DeepSeekV32Parser, HermesParser, PythonicParser, get_parser
from strategies import PUBLIC_BUGS, check_public_bug_case, check_public_bug_cases

FAMILIES = [
    (HermesParser, ("hermes",)),
    (DeepSeekV3Parser, ("deepseek_v3",)),
    (DeepSeekV31Parser, ("deepseekv31",)),
    (PythonicParser, ("pythonic",)),
]


@pytest.mark.parametrize("cls, names", FAMILIES, ids=[c.name for c, _ in FAMILIES])
def test_public_bug_cases(cls, names):
    check_public_bug_cases(cls, names)


#: the public-bug cases about names, ids, typing, string arguments or end tokens, and what of it
#: they hold the parser to (each is checked whole-text, under every default chunking and its
#: recorded chunks; ids themselves are the client assembly's, judged by the verdicts' call-id check)
TOPICS = {
    "B01": "typing: the text 1 of a parameter declared integer is the number 1, in every chunking",
    "B02": "names/arguments: a zero-parameter call keeps its name and gives {}",
    "B11": "names/arguments: a call whose name and arguments arrive in one delta keeps both",
    "B12": "names and ids: two Kimi calls (functions.NAME:IDX ids) split by a multi-token delta keep their names",
    "B18": "names: two calls of one name in one delta stay two calls",
    "B25": "end tokens: <|call|> ends a Harmony call; nothing leaks into content",
    "B37": "end tokens: the arguments' tail is kept when <｜tool▁call▁end｜> shares its delta",
    "B39": "names and ids: text before a Kimi call stays content, the call keeps its name",
    "B43": "names: two Mistral v11 calls are two names, not one merged name",
    "B51": "names: every call of a step that spans a call's tail and content has its name",
    "B53": "names: a leading-underscore name and trailing prose parse the same streamed and whole",
}


@pytest.mark.xfail(strict=True, reason="not done: a DSML block opened inside a reasoning section the prompt opened and never closed is read as reasoning (B49 wants the call)")
def test_b49_dsml_call_inside_open_reasoning():
    """B49 (DeepSeek V4, the prompt ends with <think>): the DSML call after the reasoning text is
    a call, and no DSML markup is reasoning."""
    if not PUBLIC_BUGS.exists():
        pytest.skip(f"no {PUBLIC_BUGS}")
    case = next(c for c in map(json.loads, PUBLIC_BUGS.read_text(encoding="utf-8").splitlines()) if c["id"] == "B49")
    check_public_bug_case(DeepSeekV32Parser, case)


@pytest.mark.parametrize("cid", sorted(TOPICS))
def test_cases_on_names_ids_typing_string_arguments_end_tokens(cid):
    """Each case of :data:`TOPICS` exists, names a built-in parser, and passes
    :func:`strategies.check_public_bug_case` with that parser."""
    if not PUBLIC_BUGS.exists():
        pytest.skip(f"no {PUBLIC_BUGS}")
    cases = {c["id"]: c for c in (json.loads(line) for line in PUBLIC_BUGS.read_text(encoding="utf-8").splitlines() if line.strip())}
    case = cases[cid]
    check_public_bug_case(get_parser(case["input"]["parser"]), case)
