"""Chunkings, replay of a tool parser over a chunking, and OpenAI-SDK client assembly.

A **chunking** splits a raw completion into **deltas** (the text of each streaming step) whose
join is the completion. Names (all lengths and positions in chars):

- ``recorded``: the captured steps (``steps=``), checked to join to the text;
- ``whole``: one delta; ``char``: one char per delta; ``fixed-N``: N chars per delta;
- ``token``: one token per delta, cut at the offsets of a ``tokenizers.Tokenizer`` (or a
  transformers fast tokenizer) encoding with ``add_special_tokens=False``;
- ``char-raw``: one char per delta, cutting inside markers too (opt-in: no real server does);
- ``random-<seed>``: seeded random cuts; ``split-<k>``: the two-way split at char ``k``.

Synthetic chunkings never cut strictly inside an occurrence of one of the parser's ``markers``
(a real server sends a special token whole): such a cut is dropped, merging the two deltas around
it. ``recorded`` and ``char-raw`` are not adjusted.

:func:`replay_stream` feeds a fresh parser every delta, then ``finish()``, and assembles what a
client sees with :func:`assemble_openai` (exactly as the OpenAI Python SDK assembles the chunks
a server sends for those events: :mod:`replay.assemble`). :func:`check_stream_equals_whole` is the property the audit and the tests rely on:
the streamed, joined result equals the whole-text parse under every chunking.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from replay.parsers.base import StreamDelta

CHUNKINGS_DEFAULT: tuple[str, ...] = (
    "recorded",
    "whole",
    "char",
    "fixed-2",
    "fixed-3",
    "fixed-5",
    "fixed-8",
    "fixed-13",
    "fixed-40",
)

#: Chunkings that need no input but the text (``recorded`` needs steps, ``token`` a tokenizer).
SYNTHETIC_DEFAULT: tuple[str, ...] = tuple(c for c in CHUNKINGS_DEFAULT if c != "recorded")


class ChunkingError(ValueError):
    """A chunking that cannot be applied: unknown name, or ``recorded``/``token`` without (or with
    inconsistent) input."""


def default_chunkings(*, tokenizer: Any = None, recorded: bool = True) -> tuple[str, ...]:
    """The default chunking names: :data:`CHUNKINGS_DEFAULT` (without ``recorded`` when
    ``recorded`` is False), plus ``token`` when a tokenizer is given."""
    names = CHUNKINGS_DEFAULT if recorded else SYNTHETIC_DEFAULT
    return names + (("token",) if tokenizer is not None else ())


def forbidden_cuts(text: str, markers: Iterable[str] = ()) -> set[int]:
    """Cut positions (chars) strictly inside an occurrence of any marker in ``text``."""
    bad: set[int] = set()
    for m in markers:
        if len(m) < 2:
            continue
        i = text.find(m)
        while i >= 0:
            bad.update(range(i + 1, i + len(m)))
            i = text.find(m, i + 1)
    return bad


def _cut(text: str, cuts: Iterable[int], bad: set[int]) -> list[str]:
    points = sorted({c for c in cuts if 0 < c < len(text) and c not in bad})
    out, prev = [], 0
    for c in points:
        out.append(text[prev:c])
        prev = c
    out.append(text[prev:])
    return out


def _token_cuts(text: str, tokenizer: Any) -> list[int]:
    """Token boundaries (chars) of ``text`` under a tokenizers or transformers fast tokenizer."""
    offsets = None
    try:
        enc = tokenizer.encode(text, add_special_tokens=False)
        offsets = getattr(enc, "offsets", None)
    except TypeError:
        offsets = None
    if offsets is None:
        try:
            offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        except Exception as exc:  # not a fast tokenizer
            raise ChunkingError(f"token chunking needs a tokenizer with char offsets: {exc!r}") from exc
    cuts: list[int] = []
    for start, end in offsets:
        cuts.extend((start, end))
    return cuts


def split(
    text: str,
    chunking: str,
    *,
    markers: Sequence[str] = (),
    steps: Sequence[str] | None = None,
    tokenizer: Any = None,
) -> list[str]:
    """Split ``text`` into deltas by ``chunking``; their join is ``text``.

    ``markers``: the parser's special tokens; synthetic chunkings do not cut inside them (except
    ``char-raw``). ``steps``: the captured deltas, for ``recorded``. ``tokenizer``: for ``token``.
    An empty ``text`` gives no deltas (``recorded`` gives ``steps`` as they are).

    Raises :class:`ChunkingError` for an unknown name, for ``recorded`` without steps or with
    steps that do not join to ``text``, and for ``token`` without a usable tokenizer.
    """
    if chunking == "recorded":
        if steps is None:
            raise ChunkingError("recorded chunking needs the captured steps")
        steps = list(steps)
        if "".join(steps) != text:
            raise ChunkingError("recorded steps do not join to the completion text")
        return steps
    if chunking == "token" and tokenizer is None:
        raise ChunkingError("token chunking needs a tokenizer")
    if not text:
        if chunking in ("whole", "char", "char-raw", "token") or chunking.startswith(("fixed-", "random-", "split-")):
            return []
        raise ChunkingError(f"unknown chunking {chunking!r}")
    n = len(text)
    if chunking == "char-raw":
        return list(text)
    if chunking == "whole":  # no cut: the marker positions are not needed
        return [text]
    bad = forbidden_cuts(text, markers)
    if chunking == "char":
        return _cut(text, range(1, n), bad)
    if chunking == "token":
        return _cut(text, _token_cuts(text, tokenizer), bad)
    prefix, _, arg = chunking.partition("-")
    try:
        value = int(arg)
    except ValueError:
        raise ChunkingError(f"unknown chunking {chunking!r}") from None
    if prefix == "fixed" and value > 0:
        return _cut(text, range(value, n, value), bad)
    if prefix == "split" and value >= 0:
        return _cut(text, [value], bad)
    if prefix == "random" and value >= 0:
        rng = random.Random(value)
        cuts, pos = [], 0
        while pos < n:
            pos += rng.choice((1, 1, 2, 3, 4, 5, 7, 11, 17))
            cuts.append(pos)
        return _cut(text, cuts, bad)
    raise ChunkingError(f"unknown chunking {chunking!r}")


def check_chunking(chunking: str, *, tokenizer: Any = None) -> None:
    """Raise :class:`ChunkingError` unless ``chunking`` is a name :func:`split` understands
    (and, for ``token``, a tokenizer is given); used to reject a bad option before a run starts."""
    split("ab", chunking, steps=["a", "b"], tokenizer=tokenizer)


#: The chunking names an option accepts, for messages.
CHUNKING_FORMS = "comma-separated names: recorded, whole, char, char-raw, token, fixed-N, random-SEED, split-K, split-all"


def parse_chunkings(value: str) -> tuple[str, ...]:
    """``--chunkings`` text -> the chunking names, in order. Raises :class:`ChunkingError` for an
    empty list, an empty name (both silently meant the defaults once) or an unknown name.
    ``token`` (which needs a tokenizer, checked with it: :func:`replay.runspec.spec_from_options`)
    and ``split-all`` (every ``split-K``: :data:`replay.stages.stream.SPLIT_ALL`) are accepted as
    names."""
    names = tuple(c.strip() for c in value.split(","))
    if not any(names):
        raise ChunkingError(f"empty; expected {CHUNKING_FORMS} (omit the option for the defaults)")
    for name in names:
        if not name:
            raise ChunkingError(f"{value!r} has an empty name; expected {CHUNKING_FORMS}")
        if name in ("token", "split-all"):
            continue
        try:
            check_chunking(name)
        except ChunkingError:
            raise ChunkingError(f"unknown chunking {name!r}; expected {CHUNKING_FORMS}") from None
    return names


def two_way_splits(text: str, markers: Sequence[str] = ()) -> Iterator[tuple[int, list[str]]]:
    """Every two-way split of ``text``: ``(k, [text[:k], text[k:]])`` for each cut ``k`` (chars,
    ``0 < k < len(text)``) that is not strictly inside a marker occurrence."""
    bad = forbidden_cuts(text, markers)
    for k in range(1, len(text)):
        if k not in bad:
            yield k, [text[:k], text[k:]]


# ------------------------------------------------------------------------- client assembly
@dataclass
class AssembledCall:
    """One call as the client's SDK holds it at the end of a replayed stream
    (:mod:`replay.assemble`): ``index`` its position, ``name`` (concatenated when the side sent it
    in more than one delta, as the OpenAI SDK does), ``arguments`` joined in order.

    ``names_sent``: deltas of this call that carried a name (more than 1 is the ``name-repeat``
    fault); ``id``: the call id the client holds; ``ids_sent``: the ids sent for it, in order."""

    index: int
    name: str | None
    arguments: str
    names_sent: int = 0
    id: str | None = None
    ids_sent: list[str] = field(default_factory=list)


@dataclass
class Assembled:
    """What a client ends up with: content, calls in the client's order, ``finish_reason``,
    reasoning, and ``error``: what the client SDK raised on the stream (None when it did not; the
    client then has no message, whatever the other fields hold)."""

    content: str
    calls: list[AssembledCall] = field(default_factory=list)
    finish_reason: str = "stop"
    reasoning: str = ""
    error: str | None = None


def assemble_openai(deltas: Iterable[StreamDelta], *, finish_reason: str | None = None) -> Assembled:
    """What an OpenAI SDK client ends up with from a side's parser events: the events become the
    chunks a vLLM/SGLang server sends (:func:`replay.assemble.chunks_from_events`) and are
    assembled exactly as the SDK does (:func:`replay.assemble.assemble_chat`, the one assembler
    of captured streams too): argument fragments joined by index, a name or id sent twice
    concatenated, an index that skips or goes back an SDK exception (``error``).
    ``finish_reason``: the side's own, when its framework reports one (``length`` for a truncated
    capture); else ``tool_calls`` when any call delta was sent, ``stop`` otherwise."""
    from replay.assemble import assemble_events

    res = assemble_events(deltas, finish_reason=finish_reason)
    return Assembled(
        content=res.content or "",
        calls=[
            AssembledCall(index=c.index, name=c.name, arguments=c.arguments or "", names_sent=c.names_sent, id=c.id, ids_sent=c.ids_sent)
            for c in res.calls
        ],
        finish_reason=res.finish_reason or "stop",
        reasoning=res.reasoning or "",
        error=res.error,
    )


def new_parser(parser_cls: Any, tools: list[dict[str, Any]] | None, *, reasoning_open: bool = False) -> Any:
    """A parser instance for one stream: ``parser_cls(tools)``, with ``reasoning_open=True`` only
    when asked (a plugin class without reasoning support is then constructed without it)."""
    if reasoning_open:
        try:
            return parser_cls(tools, reasoning_open=True)
        except TypeError:
            pass
    return parser_cls(tools)


_BUILTIN: list[frozenset[type]] = []


def _builtin_classes() -> frozenset[type]:
    """The built-in parser classes (exactly those: a subclass is a plugin), computed once."""
    if not _BUILTIN:
        from replay.parsers import PARSERS

        _BUILTIN.append(frozenset(PARSERS.values()))
    return _BUILTIN[0]


def replay_stream(
    parser_cls: Any,
    tools: list[dict[str, Any]] | None,
    deltas: Iterable[str],
    *,
    reasoning_open: bool = False,
    finish_reason: str | None = None,
) -> Assembled:
    """Replay one stream: a new parser (:func:`new_parser`), ``feed`` each delta (text),
    ``finish()``, and assemble the events with :func:`assemble_openai`. ``finish_reason``: the
    server's (``length`` for a capture that was cut short), else the side's own: a
    ``finish_reason`` attribute on what ``finish()`` returned (a framework adapter reporting its
    framework's), else the serving layer's rule. Parser exceptions propagate; a result that is not
    StreamDelta-shaped raises :class:`replay.plugin_check.PluginResultError` (the results of the
    built-in parser classes, :data:`replay.parsers.PARSERS`, are StreamDeltas by construction and
    not checked: the check ran on every delta of every replay)."""
    parser = new_parser(parser_cls, tools, reasoning_open=reasoning_open)
    if parser_cls in _builtin_classes():
        # an event with no content, reasoning or call delta sends no chunk and changes nothing the
        # client assembles (replay.assemble): most deltas inside a block give one, left out here
        # (StreamParser.feed_all; the engine's families run their feed shortcut there in one loop)
        events = parser.feed_all(deltas if isinstance(deltas, (list, tuple)) else list(deltas))
        last = parser.finish()
    else:
        from replay.plugin_check import check_stream_delta

        events = [check_stream_delta(parser.feed(d), "feed()") for d in deltas]
        last = check_stream_delta(parser.finish(), "finish()")
    events.append(last)
    own = getattr(last, "finish_reason", None)
    return assemble_openai(events, finish_reason=finish_reason or (own if isinstance(own, str) and own else None))


def _strict(value: Any) -> Any:
    """A comparable form of a JSON value where booleans are not numbers and key order is ignored."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(_strict(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _strict(v)) for k, v in value.items()))
    return ("other", repr(value))


def json_key(text: str | None) -> Any:
    """A comparable, hashable form of the JSON value in ``text`` (key order, spacing and escapes
    ignored; ``true`` is not ``1``; ``1`` equals ``1.0``), or None when ``text`` is None or not
    JSON. Two texts are the same value when their keys are equal and not None (:func:`same_call`);
    a caller comparing many texts with one (the re-stream stage, each side's calls with the
    reference's) computes the one's key once."""
    try:
        return _strict(json.loads(text))  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return None


def same_call(streamed_args: str, whole_args: str) -> bool:
    """True when two argument texts are the same JSON value (key order, spacing and escapes
    ignored; ``true`` is not ``1``; ``1`` equals ``1.0``). Text that is not JSON -> False."""
    a = json_key(streamed_args)
    return a is not None and a == json_key(whole_args)


# ------------------------------------------------------------------------- the property
@dataclass
class StreamMismatch:
    """One chunking under which the streamed, joined result differs from the whole-text parse.

    ``chunking``: its label; ``deltas``: what was fed; ``problems``: what differs, in words."""

    chunking: str
    deltas: list[str]
    problems: list[str]

    def describe(self) -> str:
        """A short report naming the chunking, its deltas and the differences."""
        shown = self.deltas if len(self.deltas) <= 60 else self.deltas[:60] + ["..."]
        return f"chunking {self.chunking} ({len(self.deltas)} deltas): {'; '.join(self.problems)}\n  deltas={shown!r}"


def compare_to_whole(got: Assembled, whole: Any) -> list[str]:
    """Differences between an assembled stream and a whole-text :class:`ParseResult` (words).

    Checked: content; reasoning; number of calls; per index the name, a single name delta, and the identical
    argument string; ``finish_reason`` is ``tool_calls`` iff the whole-text parse has calls."""
    problems: list[str] = []
    if getattr(got, "error", None):
        problems.append(f"the client SDK raised {got.error}")
    if got.content != whole.content:
        problems.append(f"content {got.content!r} != whole {whole.content!r}")
    if got.reasoning != getattr(whole, "reasoning", ""):
        problems.append(f"reasoning {got.reasoning!r} != whole {getattr(whole, 'reasoning', '')!r}")
    if len(got.calls) != len(whole.calls):
        problems.append(f"{len(got.calls)} calls streamed, whole-text parse has {len(whole.calls)}")
    for pos, (g, w) in enumerate(zip(got.calls, whole.calls)):
        if g.index != pos:
            problems.append(f"call at position {pos} has index {g.index}")
        if g.name != w.name:
            problems.append(f"call {pos}: name {g.name!r} != {w.name!r}")
        if g.names_sent > 1:
            problems.append(f"call {pos}: name sent {g.names_sent} times")
        if g.arguments != w.arguments:
            problems.append(f"call {pos}: arguments {g.arguments!r} != {w.arguments!r}")
    expected_reason = "tool_calls" if whole.calls else "stop"
    if got.finish_reason != expected_reason:
        problems.append(f"finish_reason {got.finish_reason} (expected {expected_reason})")
    return problems


def check_stream_equals_whole(
    parser_cls: Any,
    text: str,
    chunkings: Iterable[str | tuple[str, list[str]]],
    *,
    tools: list[dict[str, Any]] | None = None,
    tokenizer: Any = None,
    reasoning_open: bool = False,
) -> list[StreamMismatch]:
    """The stream-equals-whole property for one completion; returns the failures, fewest deltas
    first (empty when it holds).

    ``chunkings``: chunking names (split with the parser's ``markers``; ``recorded`` is skipped
    here since there are no steps) or ``(label, deltas)`` pairs given explicitly (e.g. from
    :func:`two_way_splits`). A parser exception under a chunking is reported as a failure.
    """
    whole = new_parser(parser_cls, tools, reasoning_open=reasoning_open).parse(text)
    markers = tuple(getattr(parser_cls, "markers", ()))
    failures: list[StreamMismatch] = []
    for ch in chunkings:
        if isinstance(ch, str):
            if ch == "recorded":
                continue
            label, deltas = ch, split(text, ch, markers=markers, tokenizer=tokenizer)
        else:
            label, deltas = ch[0], list(ch[1])
        try:
            got = replay_stream(parser_cls, tools, deltas, reasoning_open=reasoning_open)
        except Exception as exc:  # a parser fault is a failure of the property
            failures.append(StreamMismatch(label, deltas, [f"raised {exc!r}"]))
            continue
        problems = compare_to_whole(got, whole)
        if problems:
            failures.append(StreamMismatch(label, deltas, problems))
    failures.sort(key=lambda f: len(f.deltas))
    return failures
