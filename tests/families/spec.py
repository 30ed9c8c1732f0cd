"""What a family's test configuration holds (:class:`Family`) and the checks run on it.

One configuration per family, in ``tests/families/configs/<family>.py`` (a module-level
``FAMILY``); ``tests/families/test_families.py`` runs every behavioural test on every
configuration. A configuration is data: the family's parser class, hypothesis strategies of its
outputs, exact examples with the values every path must give, the texts the planted bugs are
shown on, the long-input guards, the shared corpus files and public-bug names it is checked
against, and the call syntax of the cross-family guards. Adding a family is adding a module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from replay.parsers.base import CallDelta, ParseResult, ToolCall
from replay.stream import replay_stream, split
from strategies import VERBATIM, assert_property


@dataclass(frozen=True)
class Feed:
    """What one ``feed(delta)`` (or ``finish()``, the last of :attr:`Example.events`) must return:
    the content and reasoning fragments and the call deltas, exactly."""

    content: str = ""
    calls: tuple[CallDelta, ...] = ()
    reasoning: str = ""


@dataclass(frozen=True)
class Example:
    """One output and what the family must make of it.

    ``expect``: the whole-text parse, exactly (None: not compared; only the property and the
    given ``events``/``streamed`` are checked). The text is also streamed under ``whole`` and
    ``char`` and, when given, as ``deltas`` (a recorded chunking): each must join to ``expect``;
    and the stream == whole property must hold under every chunking of
    :func:`strategies.all_chunkings` (``check_property``). ``events``: for ``deltas``, the exact
    return of every ``feed`` and then of ``finish()`` (one more entry than deltas). ``streamed``: the
    joined stream's ``(index, name, arguments)`` per call under ``deltas`` (or ``whole``), when a
    test pins the indices. ``tools`` / ``reasoning_open``: the request's tools; the prompt opened
    the reasoning section. An ``events`` entry None is not compared. ``prefix_step``: when set, the property also holds for the prefixes of the
    text every ``prefix_step`` chars (the stream cut anywhere)."""

    id: str
    text: str
    expect: ParseResult | None = None
    tools: list[dict[str, Any]] | None = None
    reasoning_open: bool = False
    deltas: tuple[str, ...] | None = None
    events: tuple[Feed | None, ...] | None = None
    streamed: tuple[tuple[int, str, str], ...] | None = None
    finish_reason: str | None = None
    check_property: bool = True
    prefix_step: int = 0


@dataclass(frozen=True)
class Property:
    """A hypothesis property run: the streamed == whole property on ``outputs`` (a strategy of
    texts, or of ``(text, reasoning_open)`` pairs), with ``tools`` and ``reasoning_open``; ``base``
    examples under the ``ci`` profile (scaled by :func:`hypo.examples`)."""

    id: str
    outputs: st.SearchStrategy
    base: int = 100
    tools: list[dict[str, Any]] | None = None
    reasoning_open: bool = False


@dataclass(frozen=True)
class Long:
    """A long output cut off inside a call (:func:`strategies.long_unterminated_guard`): parse and
    a fixed-4096 stream finish within 60 s, find no call and agree; ``content`` is what they give
    (:data:`strategies.VERBATIM`: the text; None: not compared)."""

    id: str
    text: str
    content: str | None = VERBATIM


@dataclass(frozen=True)
class Corpus:
    """A file of ``../shared/corpus/outputs`` the family is checked against
    (:func:`strategies.check_corpus_records` with ``options``): ``checked`` records asserted;
    ``skipped``, when given, the number of skip reasons that must be met (or the reasons, in
    any order); ``with_calls``, when given,
    how many of the checked records expect calls."""

    fname: str
    checked: int
    options: dict[str, Any] = field(default_factory=dict)
    skipped: int | tuple[str, ...] | None = None
    with_calls: int | None = None


@dataclass(frozen=True)
class Syntax:
    """How the family writes calls, for the cross-family guards (deep nesting, 1 MB calls):
    ``head + VALUE + tail`` is a call to ``f`` whose argument ``a`` has the value text VALUE
    (JSON text unless ``notation`` says otherwise); ``normal`` a complete call to ``g`` with no
    arguments; ``string`` what opens a string value."""

    head: str
    tail: str
    normal: str
    string: str = '"'
    notation: str = "json"  # json | gemma4

    def deep(self, shape: str, n: int) -> str:
        """``array``: ``[[[...]]]``; ``mixed``: arrays and objects alternating, ``[{"a": [{"a": ...``."""
        if shape == "array":
            return "[" * n + "]" * n
        key = "a:" if self.notation == "gemma4" else '"a":'
        return ("[{" + key) * (n // 2) + "1" + "}]" * (n // 2)


@dataclass(frozen=True)
class Family:
    """A family's test configuration (module docstring).

    ``cls``: the parser class (its ``name`` is the family's registry name). ``planted``: a text with
    at least two calls (the planted bugs of raw arguments, greedy merge and late calls are shown on
    it). ``finish``: a text whose ``finish()`` returns something (held-back text or a call): the
    silent-``finish()`` bug is shown on it; when ``finish_calls`` it is a call that only
    ``finish()`` reports, and the dropped-finish-calls bug is shown too. ``public_bugs``: the
    ``parser`` names of the family's cases in ``../shared/cases/public-bugs.jsonl``;
    ``public_bug_ids``: the ids those must be, when pinned. ``extra``: checks of the family's own
    data that fit no field (called with no argument; a skip is a ``pytest.skip``).
    """

    cls: type
    syntax: tuple[Syntax, ...]
    properties: tuple[Property, ...]
    examples: tuple[Example, ...]
    planted: str
    finish: str
    finish_calls: bool = False
    long: tuple[Long, ...] = ()
    corpus: tuple[Corpus, ...] = ()
    public_bugs: tuple[str, ...] = ()
    public_bug_ids: tuple[str, ...] | None = None
    extra: tuple[Callable[[], None], ...] = ()
    id: str = ""

    @property
    def name(self) -> str:
        return self.id or self.cls.name


def _joined(got) -> tuple:
    return tuple((c.name, c.arguments) for c in got.calls)


def check_example(cls, ex: Example) -> None:
    """Every assertion :class:`Example` describes, on ``cls``."""
    new = lambda: cls(ex.tools, reasoning_open=ex.reasoning_open)  # noqa: E731
    whole = new().parse(ex.text)
    if ex.expect is not None:
        assert whole == ex.expect, (ex.id, whole)
    runs = {c: split(ex.text, c, markers=cls.markers) for c in ("whole", "char")}
    if ex.deltas is not None:
        assert "".join(ex.deltas) == ex.text, ex.id
        runs["deltas"] = list(ex.deltas)
    for label, deltas in runs.items():
        got = replay_stream(cls, ex.tools, deltas, reasoning_open=ex.reasoning_open)
        at = (ex.id, label)
        assert _joined(got) == tuple((c.name, c.arguments) for c in whole.calls), at
        assert (got.content, got.reasoning) == (whole.content, whole.reasoning), at
        want_finish = ex.finish_reason or ("tool_calls" if whole.calls else "stop")
        assert got.finish_reason == want_finish, at
        if ex.streamed is not None and label == ("deltas" if ex.deltas is not None else "whole"):
            assert tuple((c.index, c.name, c.arguments) for c in got.calls) == ex.streamed, at
    if ex.events is not None:
        assert ex.deltas is not None and len(ex.events) == len(ex.deltas) + 1, ex.id
        p = new()
        outs = [p.feed(d) for d in ex.deltas] + [p.finish()]
        for k, (out, want) in enumerate(zip(outs, ex.events)):
            got = Feed(out.content, tuple(out.calls), getattr(out, "reasoning", ""))
            assert want is None or got == want, (ex.id, "finish" if k == len(ex.deltas) else f"feed {k}", got)
    if ex.check_property:
        assert_property(cls, ex.text, tools=ex.tools, reasoning_open=ex.reasoning_open)
    if ex.prefix_step:
        for k in range(0, len(ex.text), ex.prefix_step):
            assert_property(cls, ex.text[:k], tools=ex.tools, reasoning_open=ex.reasoning_open)


def call(name: str, arguments: str) -> ToolCall:
    """Shorthand of the configurations for a whole-text call."""
    return ToolCall(name, arguments)
