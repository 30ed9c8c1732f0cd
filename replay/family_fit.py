"""Does a completion fit the tool-parser family picked for it? The ``family_fit`` facts.

The re-stream stage picks one family per exchange (``--parser``, else the served model name,
:func:`replay.parsers.family_for_model`). When a capture's model name does not say which syntax
the model really writes (a fine-tune, a gateway alias, a model served with another family's
template), every call is content to the picked parser and the audit counts nothing wrong. This
module tells that case apart from a completion without calls, from the families' own declared
markers: each built-in parser class declares ``call_starts``, the distinctive markers that open a
call or a call section in its syntax (``<tool_call>``, ``[TOOL_CALLS]``, ``<|tool_call_begin|>``;
never generic text such as ``[`` or ``{``, so bare-JSON and bare-list syntaxes are not guessed).

Per exchange (one row of :data:`replay.tables.FAMILY_FIT`), on the raw completion, or on the
served content when the capture has no raw completion (the content then holds what the served
parser left unparsed):

* ``marker_families``: every family whose call-start markers occur in the text, registry order;
* ``family_markers``: whether the picked family's own call starts occur (null: the picked parser
  declares none, e.g. a plugin of no built-in family);
* ``looks_like``: set only when the picked family's call starts do not occur (or no family was
  picked) and another family's do, and that family's whole-text parse finds more calls there than
  the picked family's parse does. Among several candidates (families sharing ``<tool_call>``), the
  one whose parse finds the most calls to declared tools wins, then the most calls, then registry
  order. A completion holding the picked family's markers is never flagged.

The SQL (``queries/family_mismatch.sql``) counts the rows; the report names them ("12 exchanges
of model X look like family Y; try --parser Y", :func:`replay.report.markdown.mismatch_lines`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from replay.deadline import deadline
from replay.parsers import PARSERS, families, get_parser
from replay.plugin_check import check_parse_result
from replay.stream import new_parser

__all__ = ["call_starts_of", "families_in", "fit_row"]  # the report's sentence: replay.report.markdown.mismatch_lines


@functools.cache
def _table() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``((family, call_starts), ...)`` of the built-in families, registry order."""
    return tuple((c.name, tuple(getattr(c, "call_starts", ()))) for c in families())


def call_starts_of(cls: Any) -> tuple[str, ...] | None:
    """The call-start markers of parser class ``cls``: its own ``call_starts``, else those of the
    built-in family its ``name`` names (a framework adapter or a subclass named ``hermes``);
    None when neither declares any (such a side cannot be judged for fit)."""
    starts = getattr(cls, "call_starts", None)
    if starts is None:
        builtin = PARSERS.get(str(getattr(cls, "name", "")))
        starts = getattr(builtin, "call_starts", None) if builtin is not None else None
    return tuple(starts) if starts else None


@functools.cache
def _groups() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The distinct call-start markers of :func:`_table`, grouped by their first two characters:
    ``((prefix, markers), ...)`` (a marker can occur in a text only where its prefix does)."""
    groups: dict[str, list[str]] = {}
    for _, starts in _table():
        for m in starts:
            ms = groups.setdefault(m[:2], [])
            if m not in ms:
                ms.append(m)
    return tuple((p, tuple(ms)) for p, ms in groups.items())


def families_in(text: str) -> dict[str, str]:
    """``{family: the first of its call-start markers found in text}`` for every built-in family
    whose call starts occur in ``text``, in registry order (plain substring search; each distinct
    marker searched once, and only when its first two characters occur: 26 searches of a
    completion became about 7)."""
    present: set[str] = set()
    for prefix, ms in _groups():
        if prefix in text:
            present.update(m for m in ms if m in text)
    if not present:
        return {}
    found: dict[str, str] = {}
    for name, starts in _table():
        for m in starts:
            if m in present:
                found[name] = m
                break
    return found


#: ``family`` -> :func:`_picked`'s answer, per process (a capture names a few families; bounded).
_PICKED: dict[Any, tuple[Any, Any, tuple[str, ...] | None]] = {}


def _picked(family: str | None) -> tuple[Any, Any, tuple[str, ...] | None]:
    """``(parser class or None, the family name a row records, its call starts or None)`` for the
    parser spec ``family`` (None: none picked; a spec that does not resolve: no class), computed
    once per spec and process (``get_parser`` and :func:`call_starts_of` ran per exchange)."""
    try:
        return _PICKED[family]
    except (KeyError, TypeError):
        pass
    try:
        cls = get_parser(family) if family is not None else None
    except Exception:  # noqa: BLE001 - a bad spec is reported by the stage's other rows
        cls = None
    picked = str(getattr(cls, "name", family)) if cls is not None else family
    got = (cls, picked, call_starts_of(cls) if cls is not None else None)
    try:
        if len(_PICKED) >= 256:
            _PICKED.clear()
        _PICKED[family] = got
    except TypeError:  # an unhashable spec (never from the stage)
        pass
    return got


def _parse_calls(cls: Any, text: str, tools: list[dict[str, Any]] | None, reasoning_open: bool, limit: float) -> tuple[int, int]:
    """``(calls to declared tools, calls)`` of ``cls``'s whole-text parse of ``text``; ``(0, 0)``
    when the parse raises or times out (the exchange is then not called a fit for ``cls``)."""
    try:
        with deadline(limit):
            res = check_parse_result(new_parser(cls, tools, reasoning_open=reasoning_open).parse(text))
    except Exception:  # noqa: BLE001 - a candidate family that cannot parse the text does not fit it
        return 0, 0
    declared = {((t or {}).get("function") or {}).get("name") for t in tools or ()}
    return sum(1 for c in res.calls if c.name in declared), len(res.calls)


def fit_row(
    exchange_id: Any,
    model: str | None,
    family: str | None,
    text: str,
    source: str,
    tools: list[dict[str, Any]] | None | Callable[[], list[dict[str, Any]] | None] = None,
    *,
    reasoning_open: bool = False,
    limit: float = 0,
) -> dict[str, Any]:
    """One ``family_fit`` row (schema :data:`replay.tables.FAMILY_FIT`) for an exchange.

    ``family``: the parser spec picked for it (a built-in name or alias, a plugin spec; None when
    none could be picked); ``text``: the raw completion, or the served content (``source``
    ``completion`` / ``served_content``); ``tools``: the request's tools in OpenAI form, or a
    function returning them (called only when candidate parses run: they need the tools, and
    calls to declared tools rank first); ``limit``: seconds per
    candidate parse (0: none; needs :func:`replay.deadline.deadlines_installed`). Never raises.
    """
    cls, picked, own = _picked(family)
    found = families_in(text)
    row: dict[str, Any] = {
        "exchange_id": exchange_id,
        "model": model,
        "family": picked,
        "text_source": source,
        "marker_families": list(found),
        "family_markers": None,
        "looks_like": None,
        "looks_like_marker": None,
        "looks_like_calls": None,
        "family_calls": None,
    }
    if own is not None:
        row["family_markers"] = any(m in text for m in own)
    elif cls is not None:
        return row  # a parser without declared call starts: its fit cannot be judged
    others = [f for f in found if f != picked]
    if row["family_markers"] or not others:
        return row
    if callable(tools):
        try:
            tools = tools()
        except Exception:  # noqa: BLE001 - an unreadable request: parse without declarations
            tools = None
    mine = _parse_calls(cls, text, tools, reasoning_open, limit) if cls is not None else (0, 0)
    best: tuple[tuple[int, int], str] | None = None
    for name in others:
        got = _parse_calls(PARSERS[name], text, tools, reasoning_open, limit)
        if best is None or got > best[0]:  # strict: the earlier family wins a tie
            best = (got, name)
    row["family_calls"] = mine[1] if cls is not None else None
    if best is not None and best[0][1] > mine[1]:
        row["looks_like"] = best[1]
        row["looks_like_marker"] = found[best[1]]
        row["looks_like_calls"] = best[0][1]
    return row

