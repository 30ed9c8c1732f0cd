"""Shared pieces of the parser tests: hypothesis strategies, the property assertion, planted bugs.

Every family's test module imports from here, so that each family is held to one property:
for every chunking (default ones, ``char-raw``, seeded random splits, every two-way split) the
streamed calls joined by index equal the whole-text parse (see
:func:`replay.stream.check_stream_equals_whole`).
"""

from __future__ import annotations

import json  # noqa: F401  (re-exported for family test modules)

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from replay.parsers.base import CallDelta, StreamDelta
from replay.stream import CHUNKINGS_DEFAULT, check_stream_equals_whole, replay_stream, two_way_splits

PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def all_chunkings(parser_cls, text):
    """Every default chunking, char-raw, three seeded random splits and every two-way split."""
    named = [*CHUNKINGS_DEFAULT, "char-raw", "random-0", "random-1", "random-2"]
    return named + [(f"split-{k}", d) for k, d in two_way_splits(text, parser_cls.markers)]


def assert_property(parser_cls, text, *, tools=None, reasoning_open=False):
    """Streamed == whole for ``text`` under every chunking of :func:`all_chunkings`; the failure
    message names the smallest failing chunking and its deltas."""
    failures = check_stream_equals_whole(
        parser_cls, text, all_chunkings(parser_cls, text), tools=tools, reasoning_open=reasoning_open
    )
    assert not failures, f"{len(failures)} failing chunkings; smallest: {failures[0].describe()}\n text={text!r}"


THINK_PIECES = ["<think>", "</think>", "<thi", "</th", "\n", " "]


def with_reasoning(body_strategy, markers=()):
    """``(text, reasoning_open)``: a body, sometimes behind a ``<think>...</think>`` section
    (opened in the output, or by the prompt), whose text may mention the family's markers."""
    inner = text_with(list(markers) + THINK_PIECES[2:])
    head = st.one_of(
        st.just(("", False)),
        st.builds(lambda r, w: (f"<think>{r}</think>{w}", False), inner, st.sampled_from(["", "\n\n", " "])),
        st.builds(lambda r, w: (f"{r}</think>{w}", True), inner, st.sampled_from(["", "\n"])),
        st.builds(lambda r: (f"<think>{r}", False), inner),  # never closed
    )
    return st.tuples(head, body_strategy).map(lambda hb: (hb[0][0] + hb[1], hb[0][1]))


def stream(parser_cls, deltas):
    return replay_stream(parser_cls, None, deltas)


plain_chars = st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs", "Cc"))


def text_with(markers):
    """Free text that often contains the family's markers or pieces of them."""
    piece = st.one_of(
        st.text(plain_chars, max_size=6),
        st.sampled_from(["\n", " ", "<", ">", "{", "}", '"', "\\", "é", "中文", "😀"]),
        st.sampled_from(markers),
    )
    return st.lists(piece, max_size=4).map("".join)


def json_values(markers):
    strings = st.one_of(
        st.text(max_size=8),
        st.sampled_from(['"', "\\", "\n", "\\n", "\u2028", "é", "\U0001f600", "</", "{", "}"]),
        st.builds(lambda a, m, b: a + m + b, st.text(max_size=3), st.sampled_from(markers), st.text(max_size=3)),
    )
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**15), 10**15),
        st.floats(allow_nan=False, allow_infinity=False),
        strings,
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=8,
    )


def json_objects(markers):
    return st.dictionaries(st.text(max_size=6) | st.sampled_from(["a", "city", "path"]), json_values(markers), max_size=4)


DUMP_STYLES = [{}, {"ensure_ascii": False}, {"separators": (",", ":")}, {"indent": 1}, {"indent": 2, "ensure_ascii": False}]
ws = st.sampled_from(["", "\n", " ", "\n\n", " \t\r\n"])
names = st.one_of(st.sampled_from(["get_weather", "f", "search_web", "a.b-c"]), st.text(max_size=6))


class RawArgsFirst:
    """Planted bug (a): the model's raw argument text is sent before the parsed JSON."""

    def _emit_call(self, index, name, arguments, raw):
        return [CallDelta(index, name, raw), CallDelta(index, None, arguments)]


class SilentFinish:
    """Planted bug (b): finish() reports nothing."""

    def finish(self):
        return StreamDelta()




class DropFinishCalls:
    """Planted bug (b'), for parsers that emit calls from finish(): its calls are dropped, its
    content kept."""

    def finish(self):
        out = super().finish()
        return StreamDelta(content=out.content, reasoning=getattr(out, "reasoning", ""))
