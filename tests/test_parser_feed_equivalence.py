"""Feeding a parser many deltas at once equals feeding them one by one: ``feed_all`` (how the
re-stream stage replays a built-in parser: :func:`replay.stream.replay_stream`) against the plain
path it shortcuts: ``feed`` each delta and keep the events that carry anything.

For every family configuration (``tests/families/configs``), outputs drawn from the family's own
strategies (with end tokens, pieces of them and reasoning tags put in at drawn places) are cut
at drawn positions (empty deltas included) and fed both ways: the events,
the parser's whole state afterwards (buffers, open block, wake rule and its search position,
end-token stripper, reasoning splitter) and what ``finish()`` then returns must be equal, also
when the stream is fed in two runs of ``feed_all`` or with ``feed_all`` and ``feed`` mixed."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from families.configs import FAMILIES
from hypo import budget
from replay.parsers.hermes import HermesParser
from replay.stream import new_parser

PROPERTIES = [(f, p) for f in FAMILIES for p in f.properties]


def _state(value, depth=0):
    """A comparable picture of an object's state: its attributes (``__dict__`` and slots),
    recursively; containers element by element; compiled patterns and callables by identity of
    what they are (the same class or pattern), other values as they are."""
    if depth > 8:
        return repr(value)
    if value is None or isinstance(value, (str, int, float, bool, bytes)):
        return value
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_state(v, depth + 1) for v in value])
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, sorted(map(repr, value)))
    if isinstance(value, dict):
        return {k: _state(v, depth + 1) for k, v in value.items()}
    if isinstance(value, re.Pattern):
        return ("pattern", value.pattern)
    if callable(value) and not hasattr(value, "__dict__"):
        return ("callable", getattr(value, "__qualname__", repr(value)))
    attrs = dict(getattr(value, "__dict__", {}))
    for cls in type(value).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(value, name):
                attrs[name] = getattr(value, name)
    return (type(value).__qualname__, {k: _state(v, depth + 1) for k, v in attrs.items() if k != "tools"})


def _cut(text: str, cuts: list[int]) -> list[str]:
    cuts = sorted(min(c, len(text)) for c in cuts)
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def _drawn(prop, drawn):
    return drawn if isinstance(drawn, tuple) else (drawn, prop.reasoning_open)


def _pair(cls, prop, opened):
    return new_parser(cls, prop.tools, reasoning_open=opened), new_parser(cls, prop.tools, reasoning_open=opened)


def _plain(parser, deltas):
    return [e for e in map(parser.feed, deltas) if e.content or e.calls or e.reasoning]


@pytest.mark.parametrize("fam, prop", PROPERTIES, ids=[f"{f.name}-{p.id}" for f, p in PROPERTIES])
def test_feed_all_gives_the_events_and_state_of_feed_per_delta(fam, prop):
    # end tokens (removed by the stripper before anything else), their prefixes and the
    # reasoning tags, put into the drawn outputs at drawn places
    tokens = [*fam.cls.end_tokens, *(t[: len(t) // 2] for t in fam.cls.end_tokens), "<think>", "</think>"]
    inserts = st.lists(st.tuples(st.integers(0, 400), st.sampled_from(tokens)), max_size=3)

    @budget(max(10, prop.base // 4))
    @given(prop.outputs, inserts, st.lists(st.integers(0, 400), max_size=40), st.integers(0, 40))
    def run(drawn, extra, cuts, half):
        text, opened = _drawn(prop, drawn)
        for at, token in extra:
            at = min(at, len(text))
            text = text[:at] + token + text[at:]
        deltas = _cut(text, cuts)
        fast, plain = _pair(fam.cls, prop, opened)
        assert fast.feed_all(deltas) == _plain(plain, deltas)
        assert _state(fast) == _state(plain)
        assert fast.finish() == plain.finish()
        assert _state(fast) == _state(plain)
        # two runs of feed_all, and feed_all then feed: the state between them is feed's
        k = min(half, len(deltas))
        fast, plain = _pair(fam.cls, prop, opened)
        got = fast.feed_all(deltas[:k])
        want = _plain(plain, deltas[:k])
        assert got == want and _state(fast) == _state(plain)
        assert fast.feed_all(deltas[k:]) + [fast.finish()] == _plain(plain, deltas[k:]) + [plain.finish()]
        fast, plain = _pair(fam.cls, prop, opened)
        got = fast.feed_all(deltas[:k]) + _plain(fast, deltas[k:])
        assert got == _plain(plain, deltas) and fast.finish() == plain.finish()

    run()


def test_feed_all_after_finish_raises_as_feed_does():
    p = HermesParser(None)
    p.feed_all(["a"])
    p.finish()
    with pytest.raises(RuntimeError, match="after finish"):
        p.feed_all(["b"])
    assert p.feed_all([]) == []


def test_feed_all_in_block_and_content_runs():
    """The two shortcuts on the kind of stream the bench records (steps of a few chars): content
    deltas are events of their own, in-block deltas none, the call in the delta that closes it."""
    steps = ["Sure", ", here", ":\n", "<tool_call>", '\n{"', 'name": "f', '", "arg', 'uments": {"a', '": 1}}', "\n</tool_call>", " done", ""]
    p = HermesParser(None)
    events = p.feed_all(steps)
    assert [e.content for e in events] == ["Sure", ", here", ":\n", "", " done"]
    assert [(c.index, c.name, c.arguments) for e in events for c in e.calls] == [(0, "f", '{"a": 1}')]
    assert not p.finish()


class _TildeEnd(HermesParser):
    """End tokens whose first character starts no marker (feed_all's content run must stop at it)."""

    end_tokens = ("~eot~",)


class _TwoEnds(HermesParser):
    """Two end tokens of different first characters (the checks of several first characters)."""

    end_tokens = ("~eot~", "#end#")


class _NoEnds(HermesParser):
    end_tokens = ()


_PIECES = st.sampled_from(
    ["<tool_call>", "</tool_call>", '{"name": "f", "arguments": {"a": "~#<"}}', "\n", " ", "~eot~", "~eo", "#end#", "#e", "~", "#", "<", "<think>", "</think>", "x", "é😀"]
)


@pytest.mark.parametrize("cls", [_TildeEnd, _TwoEnds, _NoEnds, HermesParser], ids=lambda c: c.__name__)
def test_feed_all_with_end_tokens_of_other_first_characters(cls):
    @budget(150)
    @given(st.lists(st.one_of(_PIECES, st.text(max_size=3)), max_size=12).map("".join), st.lists(st.integers(0, 120), max_size=30), st.booleans())
    def run(text, cuts, opened):
        deltas = _cut(text, cuts)
        fast, plain = new_parser(cls, None, reasoning_open=opened), new_parser(cls, None, reasoning_open=opened)
        assert fast.feed_all(deltas) == _plain(plain, deltas)
        assert _state(fast) == _state(plain)
        assert fast.finish() == plain.finish()

    run()
