"""Checks on what a tool parser returns, at the boundary where ``replay`` calls it.

A parser (built in, a plugin, a framework adapter) must return a ``ParseResult`` from ``parse()``
and a ``StreamDelta`` from ``feed()``/``finish()`` (:mod:`replay.parsers.base`), or any object
with the same attributes. A plugin that returns something else (``None``, a string, a dict, a
call whose ``index`` is not a non-negative int, whose ``name`` or ``arguments`` is not a string)
would otherwise crash the audit far from the plugin, when the result is judged or written to
Parquet. These functions raise :class:`PluginResultError` naming the method and what was wrong;
the callers (``replay.stream.replay_stream``, the pipeline's whole-text parses, the worker) run
them inside their per-exchange ``try``, so the fault becomes that row's ``error`` and the audit
goes on. Stdlib only (the worker imports it).
"""

from __future__ import annotations

from typing import Any

#: Largest call index accepted: the ``calls.index`` column is a 32-bit int (replay/tables.py).
MAX_INDEX = 2**31 - 1


class PluginResultError(TypeError):
    """A parser returned a value of the wrong shape; the message names the method and the fault."""


def _kind(value: Any) -> str:
    return type(value).__name__


def _text(value: Any, what: str) -> None:
    """``value`` must be a string or None (read as empty)."""
    if value is not None and not isinstance(value, str):
        raise PluginResultError(f"{what} is {_kind(value)} {value!r:.60}, not a string")


def _calls(d: Any, method: str) -> list[Any]:
    calls = getattr(d, "calls", ())
    if not isinstance(calls, (list, tuple)):
        raise PluginResultError(f"{method} returned calls of type {_kind(calls)}, not a list")
    return list(calls)


def check_parse_result(res: Any, method: str = "parse()") -> Any:
    """``res`` (what ``parse(text)`` returned) if it is ParseResult-shaped: ``content`` and
    ``reasoning`` strings (or None), ``calls`` a list/tuple of objects with string ``name`` and
    ``arguments``. Raises :class:`PluginResultError` otherwise. Returns ``res`` unchanged."""
    if not hasattr(res, "content") or isinstance(res, (str, bytes, dict)):
        raise PluginResultError(f"{method} returned {_kind(res)} {res!r:.60}, not a ParseResult")
    _text(res.content, f"{method} content")
    _text(getattr(res, "reasoning", ""), f"{method} reasoning")
    for i, c in enumerate(_calls(res, method)):
        if not hasattr(c, "name") or not hasattr(c, "arguments"):
            raise PluginResultError(f"{method} call {i} is {_kind(c)} {c!r:.60}, not a ToolCall")
        if not isinstance(c.name, str):
            raise PluginResultError(f"{method} call {i} name is {_kind(c.name)} {c.name!r:.60}, not a string")
        _text(c.arguments, f"{method} call {i} ({c.name}) arguments")
    return res


def check_stream_delta(d: Any, method: str = "feed()") -> Any:
    """``d`` (what ``feed(delta)`` or ``finish()`` returned) if it is StreamDelta-shaped:
    ``content``/``reasoning`` strings (or None), ``calls`` a list/tuple of objects with an int
    ``index`` in 0..2**31-1 (not a bool), ``name`` a string or None, ``arguments`` a string (or
    None). Raises :class:`PluginResultError` otherwise. Returns ``d`` unchanged.

    Called on every delta of every replay (the hot path): a delta whose fields have exactly the
    expected types passes with a few ``type() is`` tests; anything else (a missing attribute, a
    subclass, a wrong type) goes through the full check below, which accepts or raises."""
    try:
        if type(d.content) is str and type(d.reasoning) is str and not isinstance(d, (str, bytes, dict)):
            calls = d.calls
            if type(calls) is list or type(calls) is tuple:
                for c in calls:
                    idx, name = c.index, c.name
                    if not (type(idx) is int and 0 <= idx <= MAX_INDEX and (name is None or type(name) is str) and type(c.arguments) is str):
                        break
                else:
                    return d
    except AttributeError:
        pass
    return _check_stream_delta_fully(d, method)


def _check_stream_delta_fully(d: Any, method: str) -> Any:
    """:func:`check_stream_delta` attribute by attribute, naming the first fault."""
    if not hasattr(d, "content") or isinstance(d, (str, bytes, dict)):
        raise PluginResultError(f"{method} returned {_kind(d)} {d!r:.60}, not a StreamDelta")
    _text(d.content, f"{method} content")
    _text(getattr(d, "reasoning", ""), f"{method} reasoning")
    for c in _calls(d, method):
        if not all(hasattr(c, a) for a in ("index", "name", "arguments")):
            raise PluginResultError(f"{method} returned a call {_kind(c)} {c!r:.60}, not a CallDelta")
        idx = c.index
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise PluginResultError(f"{method} returned a call index {_kind(idx)} {idx!r:.60}, not an int")
        if not 0 <= idx <= MAX_INDEX:
            raise PluginResultError(f"{method} returned call index {idx}, outside 0..{MAX_INDEX}")
        _text(c.name, f"{method} call {idx} name")
        _text(c.arguments, f"{method} call {idx} arguments")
    return d
