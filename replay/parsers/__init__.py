"""Tool parsers, one module per model family, and their registry.

- :data:`PARSERS` maps every built-in name and alias to its parser class;
- :func:`get_parser` turns a side's parser spec (a built-in name or a ``module:attr`` /
  ``file.py:attr`` plugin) into a parser class;
- :func:`family_for_model` guesses the family from a served model name.

The protocol a parser follows is in :mod:`replay.parsers.base`. To add a family: write a module
with a class following that protocol and add it (and its aliases) to :data:`PARSERS` and, if its
models can be recognised by name, to :data:`MODEL_FAMILIES`.
"""

from __future__ import annotations

import re

from replay.parsers.base import CallDelta, ParseResult, StreamDelta, ToolCall, ToolParser
from replay.parsers.deepseek_v31 import DeepSeekV31Parser
from replay.parsers.hermes import HermesParser
from replay.plugins import is_plugin_spec, load_object

__all__ = [
    "PARSERS",
    "MODEL_FAMILIES",
    "UnknownParserError",
    "get_parser",
    "family_for_model",
    "known_parser_names",
    "HermesParser",
    "DeepSeekV31Parser",
    "ToolParser",
    "ToolCall",
    "ParseResult",
    "CallDelta",
    "StreamDelta",
]

#: Built-in parser names and aliases (the names vLLM/SGLang use for ``--tool-call-parser``).
PARSERS: dict[str, type] = {
    "hermes": HermesParser,
    "qwen": HermesParser,
    "qwen25": HermesParser,
    "qwen3": HermesParser,
    "deepseek_v31": DeepSeekV31Parser,
    "deepseekv31": DeepSeekV31Parser,
    "deepseek-v3.1": DeepSeekV31Parser,
}

#: Served model name patterns (searched, case-insensitive) -> family; the first match wins,
#: a ``None`` family means "known not to be any built-in family" (e.g. Qwen3-Coder's XML format).
MODEL_FAMILIES: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(r"qwen3[-_.]?coder", re.I), None),
    (re.compile(r"qwen[-_]?2\.5|qwen[-_]?3|qwq", re.I), "hermes"),
    (re.compile(r"hermes|nousresearch", re.I), "hermes"),
    (re.compile(r"deepseek[-_ ]?v3[-_.]?1(?![0-9])", re.I), "deepseek_v31"),
)

_REQUIRED = ("parse", "feed", "finish")


class UnknownParserError(ValueError):
    """A parser spec that names no built-in parser, or a plugin that is not a tool parser."""


def known_parser_names() -> list[str]:
    """Sorted built-in parser names and aliases."""
    return sorted(PARSERS)


def get_parser(spec: str) -> type:
    """The parser class for ``spec``.

    ``spec``: a built-in name or alias (see :data:`PARSERS`, case-insensitive) or a plugin spec
    ``module:attr`` / ``path/to/file.py:attr`` loaded with :func:`replay.plugins.load_object`.
    The object must have ``parse``, ``feed``, ``finish`` and ``markers`` (the
    :class:`~replay.parsers.base.ToolParser` protocol).

    Raises :class:`UnknownParserError` (listing the known names) for an unknown name or an object
    that is not a parser; :class:`replay.plugins.PluginError` when a plugin cannot be imported.
    """
    if is_plugin_spec(spec):
        obj = load_object(spec)
        missing = [a for a in (*_REQUIRED, "markers") if not hasattr(obj, a)]
        if missing or not callable(obj):
            raise UnknownParserError(
                f"{spec!r} is not a tool parser: missing {', '.join(missing) or 'a constructor'} "
                f"(built-in parsers: {', '.join(known_parser_names())})"
            )
        return obj
    cls = PARSERS.get(spec.strip().lower())
    if cls is None:
        raise UnknownParserError(
            f"unknown tool parser {spec!r}; known: {', '.join(known_parser_names())}, "
            "or a plugin 'module:attr' / 'file.py:attr'"
        )
    return cls


def family_for_model(model: str | None) -> str | None:
    """The parser family (a :data:`PARSERS` canonical name) for a served model name, or None.

    ``model``: as in the request or the server (``Qwen/Qwen3-8B``, ``deepseek-ai/DeepSeek-V3.1``).
    Qwen2.5, Qwen3, QwQ, Hermes and NousResearch models -> ``hermes``; DeepSeek V3.1 and
    V3.1-Terminus -> ``deepseek_v31``; Qwen3-Coder (XML format, not built in yet) and unknown
    names -> None.
    """
    if not model:
        return None
    for pattern, family in MODEL_FAMILIES:
        if pattern.search(model):
            return family
    return None
