"""A block body of the shape: ws, one JSON value, ws, end marker; decided on a whole text or a prefix.

Shared by the parsers whose call blocks end in "JSON body then end marker" (Hermes, DeepSeek V3 and
V3.1, Kimi K2: the end marker closes the block; Mistral, Granite 3: the next start marker ends it
and starts the next block). :func:`read_json_block` decides a block of a whole text or, with
``final=False``, of a stream's prefix (the grammar the streaming engine reads,
:class:`~replay.parsers._family.GrammarParser`): it reads the value with
:func:`~replay.parsers._jsonscan.decode_at` and tells a value cut off by the prefix from a bad one
with :class:`~replay.parsers._jsonscan.JsonPrefix`. A value is decoded with the depth rule of
:mod:`replay.parsers._jsonscan`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from replay.parsers._jsonscan import JsonPrefix, MORE, decode_at, dumps_arguments, loads_or_too_deep, skip_ws
from replay.parsers._markers import first_marker


class _NoValue:
    def __repr__(self) -> str:
        return "NO_VALUE"


#: The value of a block body that is not one JSON value followed by ws and an end marker (or ws to
#: the end of the text); it is no JSON kind, so every call check rejects it.
NO_VALUE: Any = _NoValue()


def object_arguments(obj: Any) -> str | None:
    """The arguments text of a block whose value must be the arguments object:
    ``json.dumps(obj, ensure_ascii=False)`` when ``obj`` is a dict, else None (no call)."""
    return dumps_arguments(obj) if isinstance(obj, dict) else None


def arguments_text(args: Any) -> str | None:
    """The arguments JSON text of a JSON call's ``"arguments"`` value, or None when it makes no
    call: a dict -> ``json.dumps(args, ensure_ascii=False)``; a string (the model serialized the
    arguments itself, as Granite 4 does) -> the object it holds when it is the JSON text of an
    object (vLLM ``Hermes2ProToolParser`` passes those through single-encoded), else the string's
    own JSON text (a string value is still a call: vLLM reports it, and the client receives valid
    JSON); anything else -> None."""
    if isinstance(args, dict):
        return dumps_arguments(args)
    if isinstance(args, str):
        try:
            inner = loads_or_too_deep(args)
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            return dumps_arguments(inner)
        return dumps_arguments(args)
    return None


def _ends(end_markers: str | tuple[str, ...]) -> tuple[str, ...]:
    return (end_markers,) if isinstance(end_markers, str) else end_markers


def _end_at(text: str, ends: tuple[str, ...], pos: int, consume: bool, final: bool) -> int | None:
    """Where a block that is no call ends: at (``consume``: just after) the first end marker at
    or after ``pos``, or the end of the text; None when there is none and more text may come."""
    e, mark = first_marker(text, ends, pos)
    if e < 0:
        return len(text) if final else None
    return e + len(mark) if consume else e


def read_json_block(
    text: str,
    body_start: int,
    end_markers: str | tuple[str, ...],
    *,
    consume: bool = True,
    trailing: Callable[[str], bool] | None = None,
    final: bool = True,
    open_end: bool = True,
    prefix_shortcut: bool = True,
) -> tuple[int, Any] | None:
    """Decide the block whose body starts at ``body_start``: ``(end, value)``, or None.

    When the body is ws, one JSON value, ws and then one of ``end_markers`` (or ws to the end of
    the text), ``value`` is that value (``TOO_DEEP`` when it is nested too deeply) and ``end`` is
    after the marker (at it when not ``consume``), or the end of the text; otherwise ``value`` is
    :data:`NO_VALUE` and ``end`` is after (at) the first end marker after the value, after its
    start when it does not decode, or the end of the text.

    ``trailing(raw JSON text)``: when given and true for a value followed by other text (not ws
    then an end marker), the block ends just after the value (``end`` = its end, ``value`` the
    value) and that text is the caller's (content): Mistral's ``[TOOL_CALLS] [...]`` call list
    followed by prose.

    ``open_end``: when False, a value followed only by ws up to the end of the text is no call
    (``value`` is :data:`NO_VALUE`): the family reports a call only once its end marker came
    (DeepSeek V3 / V3.1, Kimi K2; the README's content rules).

    ``final``: ``text`` is the whole text (the whole-text parse, or the end of a stream). When
    False, ``text`` is a prefix of a stream and the result is None whenever more text could
    change it (the value or the marker may still be cut off; no end marker yet); any result
    given is the one the whole text gives (:class:`~replay.parsers._family.GrammarParser`).
    A value that does not decode is told from one cut off by :class:`JsonPrefix` (only then,
    and only on a prefix).

    On a prefix (``final`` False) without ``trailing``, every answer is decided at an end marker,
    so a prefix holding none from ``body_start`` on gets None at once, without decoding (a
    streamed block is read when it opens, before its end marker can have come: a failed decode,
    its exception and a :class:`JsonPrefix` scan per call); ``prefix_shortcut=False`` reads it
    without that shortcut (the answer is the same: ``tests/test_stream_equivalence.py`` compares them).
    """
    ends = _ends(end_markers)
    if prefix_shortcut and not final and trailing is None and first_marker(text, ends, body_start)[0] < 0:
        # without trailing, each non-None answer below on a prefix needs an end marker at or after
        # the body: after the value (the block's end, or the first one after a value that is no
        # call) or after its start (a value that does not decode); none there: None
        return None
    j = skip_ws(text, body_start)
    n = len(text)
    if j == n and not final:
        return None
    try:
        value, k = decode_at(text, j)
    except json.JSONDecodeError:
        if not final and JsonPrefix().feed(text[j:]) == MORE:
            return None  # a value cut off by the end of the prefix, not a bad one
        end = _end_at(text, ends, j, consume, final)
        return None if end is None else (end, NO_VALUE)
    m = skip_ws(text, k)
    if m == n:
        return (m, (value if open_end else NO_VALUE)) if final else None
    for e in ends:
        if text.startswith(e, m):
            return (m + len(e) if consume else m), value
    if not final and any(e.startswith(text[m:]) for e in ends):
        return None  # an end marker may be arriving
    if trailing is not None and trailing(text[j:k]):
        return k, value
    end = _end_at(text, ends, k, consume, final)
    return None if end is None else (end, NO_VALUE)
