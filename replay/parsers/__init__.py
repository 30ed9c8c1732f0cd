"""Tool parsers, one module per model family, and their registry.

- :data:`PARSERS` maps every built-in name and alias to its parser class
  (:mod:`replay.parsers.registry`, where a new family is registered);
- :func:`get_parser` turns a side's parser spec (a built-in name, a ``module:attr`` /
  ``file.py:attr`` plugin, a framework shorthand ``sglang/NAME``) into a parser class, through
  the one side-spec resolver :func:`replay.resolve.resolve_spec`;
- :func:`family_for_model` guesses the family from a served model name.

The protocol a parser follows is in :mod:`replay.parsers.base`.
"""

from __future__ import annotations

from typing import Any

from replay.parsers.base import CallDelta, ParseResult, StreamDelta, ToolCall, ToolParser
from replay.parsers.registry import (
    MODEL_FAMILIES,
    PARSERS,
    DeepSeekV3Parser,
    DeepSeekV31Parser,
    DeepSeekV32Parser,
    Gemma4Parser,
    Glm45Parser,
    Granite4Parser,
    GraniteParser,
    HarmonyParser,
    HermesParser,
    KimiK2Parser,
    Llama3JsonParser,
    MiniMaxM2Parser,
    MistralParser,
    PythonicParser,
    Qwen3CoderParser,
    SeedOssParser,
    Step3Parser,
    UnknownParserError,
    _UnknownParserName,
    families,
    family_for_model,
    known_parser_names,
)
from replay.parsers import registry as _registry
from replay.resolve import resolve_spec

__all__ = [*_registry.__all__, "get_parser"]

#: What a tool parser class has (the :class:`~replay.parsers.base.ToolParser` protocol).
_REQUIRED = ("parse", "feed", "finish")


def get_parser(spec: str) -> type:
    """The parser class for ``spec``.

    ``spec``: a built-in name or alias (see :data:`PARSERS`, case-insensitive) or a plugin spec
    ``module:attr`` / ``path/to/file.py:attr`` loaded with :func:`replay.plugins.load_object`.
    The object must have ``parse``, ``feed``, ``finish`` and ``markers`` (the
    :class:`~replay.parsers.base.ToolParser` protocol), or be a serving framework's parser class,
    which :mod:`replay.adapters` wraps; so is a shorthand ``sglang/NAME``, ``vllm/NAME``,
    ``trtllm/NAME`` (raises :class:`replay.adapters.AdapterError`, a ValueError, when the
    framework is not installed here or lacks the name).

    Raises :class:`UnknownParserError` (listing the known names) for an unknown name or an object
    that is not a parser; :class:`replay.plugins.PluginError` when a plugin cannot be imported.
    """
    return resolve_spec(
        spec,
        builtin=lambda s: PARSERS.get(s.strip().lower()),
        plugin=_plugin_parser,
        unknown=lambda s: _UnknownParserName(
            f"unknown tool parser {s!r}; known: {', '.join(known_parser_names())}, "
            "or a plugin 'module:attr' / 'file.py:attr'"
        ),
        frameworks=True,
        native=lambda obj: all(hasattr(obj, a) for a in _REQUIRED),
    )


def _plugin_parser(spec: str, obj: Any) -> type:
    """A loaded plugin object as a tool parser class; raises :class:`UnknownParserError` when it
    lacks the protocol (and no framework adapter took it)."""
    missing = [a for a in (*_REQUIRED, "markers") if not hasattr(obj, a)]
    if missing or not callable(obj):
        raise UnknownParserError(
            f"{spec!r} is not a tool parser: missing {', '.join(missing) or 'a constructor'} "
            f"(built-in parsers: {', '.join(known_parser_names())})"
        )
    return obj
