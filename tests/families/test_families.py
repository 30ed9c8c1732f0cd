"""One suite for every tool-parser family: each behavioural test runs on every configuration of
``tests/families/configs/`` (:mod:`families.spec` says what a configuration holds).

1. The property: for outputs drawn from the family's strategies, the streamed calls joined by
   index (as the OpenAI SDK joins them) equal the whole-text parse under every chunking (whole,
   per char, char-raw, fixed sizes, seeded random splits, every two-way split:
   :func:`strategies.all_chunkings`); budgets scaled by the hypothesis profile (:mod:`hypo`).
2. Exact examples: the whole-text parse, the streams and the per-delta events the configuration
   states, and the property on each.
3. Planted bugs (:mod:`families.planted`): raw arguments before the JSON, a ``finish()`` that
   reports nothing, a greedy merge of two calls, calls lost in the last delta (and, for families
   that report calls at ``finish()``, those calls dropped) are each caught, while the family's
   own parser passes on the same text.
4. Long input: a call cut off after 1 MB is parsed in bounded time and is no call; values nested
   100,000 deep are never a call and do not hide the next call.
5. Real outputs: the shared corpus (llama.cpp's test outputs), the public-bug cases and the
   upstream conformance cases (``tests/conformance``) of the family.
"""

from __future__ import annotations

import threading

import pytest
from hypothesis import given

from conformance.table import load_cases, run_case
from families.configs import FAMILIES
from families.planted import plant
from families.spec import check_example
from hypo import budget
from replay.parsers import PARSERS
from replay.parsers import families as registered_families
from replay.stream import check_stream_equals_whole, compare_to_whole, replay_stream, split
from strategies import (
    PUBLIC_BUGS,
    all_chunkings,
    assert_property,
    check_corpus_records,
    check_public_bug_cases,
    long_unterminated_guard,
    public_bug_cases,
)
from conformance.known import KNOWN

DEPTH = 100_000
MEGABYTE = 1_000_000


def _ids(items, key):
    return [key(i) for i in items]


def _each(attr):
    """``(family, item)`` for every item of every family's ``attr``, with readable ids."""
    pairs = [(f, item) for f in FAMILIES for item in getattr(f, attr)]
    return pytest.mark.parametrize("fam, item", pairs, ids=[f"{f.name}-{getattr(i, 'id', None) or getattr(i, 'fname', '')}" for f, i in pairs])


each_family = pytest.mark.parametrize("fam", FAMILIES, ids=_ids(FAMILIES, lambda f: f.name))


def test_every_registered_family_has_a_configuration():
    """Adding a family to the registry without a configuration fails here."""
    assert sorted(f.cls.name for f in FAMILIES) == sorted(c.name for c in registered_families())


# ----------------------------------------------------------------------------- 1. the property
@_each("properties")
def test_stream_equals_whole(fam, item):
    """Streamed == whole for every drawn output; ``item.base`` examples under the ``ci`` profile."""

    @budget(item.base)
    @given(item.outputs)
    def run(drawn):
        text, opened = drawn if isinstance(drawn, tuple) else (drawn, item.reasoning_open)
        assert_property(fam.cls, text, tools=item.tools, reasoning_open=opened)

    run()


# ----------------------------------------------------------------------------- 2. exact examples
@_each("examples")
def test_example(fam, item):
    check_example(fam.cls, item)


# ----------------------------------------------------------------------------- 3. planted bugs
PLANTED_ON = {
    "raw-args-first": "planted",
    "greedy-merge": "planted",
    "late-calls": "planted",
    "silent-finish": "finish",
}


@each_family
def test_planted_texts_suit_their_bugs(fam):
    """The configuration's texts can show the bugs: the planted text has two calls or more, and
    the finish text leaves ``finish()`` something to report (a call, when ``finish_calls``)."""
    assert len(fam.cls().parse(fam.planted).calls) >= 2
    p = fam.cls()
    p.feed(fam.finish)
    out = p.finish()
    assert out, "finish() reports nothing on the finish text"
    assert bool(out.calls) == fam.finish_calls


_BUG_PAIRS = [(f, bug) for f in FAMILIES for bug in [*PLANTED_ON, *(["drop-finish-calls"] if f.finish_calls else [])]]


@pytest.mark.parametrize("fam, bug", _BUG_PAIRS, ids=[f"{f.name}-{b}" for f, b in _BUG_PAIRS])
def test_planted_bug_is_caught(fam, bug):
    """``drop-finish-calls`` only for the families whose ``finish()`` reports calls (the others
    report a call only once its end marker came, so there is none to drop)."""
    text = getattr(fam, PLANTED_ON.get(bug, "finish"))
    assert check_stream_equals_whole(fam.cls, text, all_chunkings(fam.cls, text)) == []
    planted = plant(bug, fam.cls)
    failures = check_stream_equals_whole(planted, text, all_chunkings(planted, text))
    assert failures, f"{bug} not caught for {fam.name}"
    assert len(failures[0].deltas) == min(len(f.deltas) for f in failures)  # the smallest failing chunking first
    assert failures[0].chunking in failures[0].describe()


# ----------------------------------------------------------------------------- 4. long input
@_each("long")
def test_long_unterminated_call(fam, item):
    long_unterminated_guard(fam.cls, item.text, content=item.content)


def _syntaxes():
    pairs = [(f, s) for f in FAMILIES for s in f.syntax]
    return pytest.mark.parametrize("fam, syn", pairs, ids=[f"{f.name}-{k}" for k, (f, _) in enumerate(pairs)])


@_syntaxes()
def test_syntax_table_writes_calls(fam, syn):
    """The syntax itself: ``head + 1 + tail`` and ``normal`` are calls of the family."""
    text = syn.head + "1" + syn.tail + syn.normal
    assert [(c.name, c.arguments) for c in fam.cls().parse(text).calls] == [("f", '{"a": 1}'), ("g", "{}")]


@pytest.mark.parametrize("shape", ["array", "mixed"])
@_syntaxes()
def test_value_nested_100000_deep_is_no_call(fam, syn, shape):
    text = syn.head + syn.deep(shape, DEPTH) + syn.tail + syn.normal
    whole = fam.cls().parse(text)
    assert [(c.name, c.arguments) for c in whole.calls] == [("g", "{}")]
    assert syn.deep(shape, DEPTH) in whole.content
    for chunking in ("whole", "fixed-4096"):
        got = replay_stream(fam.cls, None, split(text, chunking, markers=fam.cls.markers))
        assert compare_to_whole(got, whole) == [], chunking


@_syntaxes()
def test_one_megabyte_unterminated_value(fam, syn):
    argument = syn.string + "x" * MEGABYTE
    text = syn.head + argument
    results = {}

    def run():
        results["whole"] = fam.cls().parse(text)
        results["stream"] = replay_stream(fam.cls, None, split(text, "fixed-4096", markers=fam.cls.markers))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout=60)
    assert not t.is_alive(), "parser did not finish on a 1 MB unterminated call"
    whole, got = results["whole"], results["stream"]
    assert whole.calls == () and got.calls == []
    assert whole.content.endswith(argument) and got.content == whole.content


# ----------------------------------------------------------------------------- 5. real outputs
@_each("corpus")
def test_corpus(fam, item):
    tally = check_corpus_records(fam.cls, item.fname, item.checked, **item.options)
    if isinstance(item.skipped, tuple):
        assert sorted(tally.skipped) == sorted(item.skipped)
    elif item.skipped is not None:
        assert len(tally.skipped) == item.skipped
    if item.with_calls is not None:
        assert tally.with_calls == item.with_calls


@pytest.mark.parametrize("fam", [f for f in FAMILIES if f.public_bugs], ids=lambda f: f.name)
def test_public_bug_cases(fam):
    ids = check_public_bug_cases(fam.cls, fam.public_bugs)
    if fam.public_bug_ids is not None:
        assert sorted(ids) == sorted(fam.public_bug_ids)


@pytest.mark.parametrize("fam", [f for f in FAMILIES if f.public_bug_ids], ids=lambda f: f.name)
def test_public_bug_cases_present(fam):
    if not PUBLIC_BUGS.exists():
        pytest.skip(f"no {PUBLIC_BUGS}")
    assert sorted(c["id"] for c in public_bug_cases(fam.public_bugs)) == sorted(fam.public_bug_ids)


CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_conformance_case(case):
    """The upstream case agrees with its expectation whole-text and streamed, unless
    :data:`conformance.known.KNOWN` documents why not (then it must still disagree); its text
    also keeps the stream == whole property under every chunking."""
    cls = PARSERS[case["family"]]
    outcome = run_case(case)
    if case["id"] in KNOWN:
        assert not outcome.agrees, f"{case['id']} now agrees: drop it from KNOWN ({KNOWN[case['id']]})"
    else:
        assert outcome.agrees, f"{case['id']} ({case.get('test') or case.get('cite')}): {(outcome.whole + outcome.stream)[:3]}"
    assert_property(cls, case["text"], tools=case.get("tools"))


@pytest.mark.parametrize("fam", [f for f in FAMILIES if f.extra], ids=lambda f: f.name)
def test_extra_checks(fam):
    """A family's checks of its own data (:attr:`families.spec.Family.extra`)."""
    for check in fam.extra:
        check()
