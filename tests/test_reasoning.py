"""The reasoning splitter: streamed fragments join to the whole-text split under every chunking."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hypo import examples

from replay.parsers._reasoning import ReasoningSplitter, split_reasoning

pieces = st.sampled_from(["<think>", "</think>", "<thi", "</th", "nk>", " ", "\n", "a", "é", "<", ">", "x y"])
texts = st.lists(pieces, max_size=10).map("".join)


def streamed(text: str, cuts: list[int], open: bool) -> tuple[str, str]:
    s = ReasoningSplitter(open=open)
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(text))), len(text)]
    parts = [s.feed(text[a:b]) for a, b in zip(bounds, bounds[1:])] + [s.finish()]
    return "".join(p[0] for p in parts), "".join(p[1] for p in parts)


@settings(max_examples=examples(400), deadline=None)
@given(texts, st.lists(st.integers(0, 60), max_size=12), st.booleans())
def test_streamed_split_equals_whole_split(text: str, cuts: list[int], open: bool) -> None:
    assert streamed(text, cuts, open) == split_reasoning(text, open=open)
    assert streamed(text, list(range(len(text))), open) == split_reasoning(text, open=open)


def test_rule_examples() -> None:
    assert split_reasoning("<think>plan</think>\n\nanswer") == ("plan", "answer")
    assert split_reasoning("  <think>plan</think>x") == ("plan", "x")
    assert split_reasoning("plan\n</think>\nanswer", open=True) == ("plan\n", "answer")
    assert split_reasoning("answer <think>no</think>") == ("", "answer <think>no</think>")
    assert split_reasoning("<think>never closed") == ("never closed", "")
    assert split_reasoning("no tags at all", open=True) == ("no tags at all", "")
    assert split_reasoning("<seed:think>a</seed:think>b", ("<seed:think>", "</seed:think>")) == ("a", "b")
