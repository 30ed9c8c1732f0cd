"""The registry of the built-in tool parsers: one class per model family, their names and aliases,
and the model-name patterns that pick a family.

- :data:`PARSERS` maps every built-in name and alias to its parser class;
- :func:`family_for_model` guesses the family from a served model name.

A side's parser spec (a built-in name, a ``module:attr`` / ``file.py:attr`` plugin, a framework
shorthand) becomes a class through :func:`replay.parsers.get_parser` (:mod:`replay.resolve`).
This module imports the family modules and nothing that resolves specs, so :mod:`replay.adapters`
can read the registry without an import cycle.

The protocol a parser follows is in :mod:`replay.parsers.base`. To add a family: write a module
with a :class:`~replay.parsers._family.GrammarParser` subclass (``name``, ``markers``, ``covers``,
its start markers, wake markers and one grammar function ``read``; :mod:`replay.parsers.step3` is
an example), add the class and its aliases to ``_ALIASES`` and, if its models can be recognised by
name, a pattern to :data:`MODEL_FAMILIES`.
"""

from __future__ import annotations

from replay.errors import UnknownNameError

import re

from replay.parsers.base import CallDelta, ParseResult, StreamDelta, ToolCall, ToolParser
from replay.parsers.deepseek_v3 import DeepSeekV3Parser
from replay.parsers.deepseek_v31 import DeepSeekV31Parser
from replay.parsers.deepseek_v32 import DeepSeekV32Parser
from replay.parsers.gemma4 import Gemma4Parser
from replay.parsers.glm45 import Glm45Parser
from replay.parsers.granite import Granite4Parser, GraniteParser
from replay.parsers.harmony import HarmonyParser
from replay.parsers.hermes import HermesParser
from replay.parsers.kimi_k2 import KimiK2Parser
from replay.parsers.llama3_json import Llama3JsonParser
from replay.parsers.minimax_m2 import MiniMaxM2Parser
from replay.parsers.mistral import MistralParser
from replay.parsers.pythonic import PythonicParser
from replay.parsers.qwen3_coder import Qwen3CoderParser
from replay.parsers.seed_oss import SeedOssParser
from replay.parsers.step3 import Step3Parser

__all__ = [
    "PARSERS",
    "MODEL_FAMILIES",
    "UnknownParserError",
    "family_for_model",
    "known_parser_names",
    "families",
    "DeepSeekV3Parser",
    "DeepSeekV31Parser",
    "DeepSeekV32Parser",
    "Gemma4Parser",
    "Glm45Parser",
    "GraniteParser",
    "Granite4Parser",
    "HarmonyParser",
    "HermesParser",
    "KimiK2Parser",
    "Llama3JsonParser",
    "MiniMaxM2Parser",
    "MistralParser",
    "PythonicParser",
    "Qwen3CoderParser",
    "SeedOssParser",
    "Step3Parser",
    "ToolParser",
    "ToolCall",
    "ParseResult",
    "CallDelta",
    "StreamDelta",
]

#: Each family's class and its aliases: the names vLLM (``--tool-call-parser``) and SGLang
#: (``--tool-call-parser``) use for the same format, so a user can name the parser as their
#: server does.
_ALIASES: dict[type, tuple[str, ...]] = {
    HermesParser: ("qwen", "qwen25", "qwen3"),
    Qwen3CoderParser: ("qwen3_xml", "qwen3coder"),
    Llama3JsonParser: ("llama3", "llama4_json"),
    PythonicParser: ("llama4_pythonic", "lfm2"),
    MistralParser: (),
    DeepSeekV3Parser: ("deepseekv3", "deepseek-v3", "deepseek_r1"),
    DeepSeekV31Parser: ("deepseekv31", "deepseek-v3.1"),
    DeepSeekV32Parser: ("deepseekv32", "deepseek_v4", "deepseekv4"),
    KimiK2Parser: ("kimik2",),
    Glm45Parser: ("glm47", "glm4_moe", "glm"),
    HarmonyParser: ("openai", "gpt-oss", "gpt_oss"),
    Gemma4Parser: (),
    MiniMaxM2Parser: ("minimax-m2",),
    GraniteParser: ("granite3",),
    Granite4Parser: (),
    SeedOssParser: ("seed-oss",),
    Step3Parser: ("step-3",),
}

#: Built-in parser names and aliases -> class.
PARSERS: dict[str, type] = {}
for _cls, _aliases in _ALIASES.items():
    for _alias in (_cls.name, *_aliases):
        PARSERS[_alias] = _cls

#: Served model name patterns (searched, case-insensitive) -> family; the first match wins, so
#: a specific name comes before the general one it would also match (Qwen3-Coder and Qwen3.5
#: before Qwen3; Hermes-3-Llama before Llama 3; DeepSeek V3.1 and V3.2 before V3).
MODEL_FAMILIES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.I), family)
    for pattern, family in (
        (r"qwen3[-_.]?coder", "qwen3_coder"),
        (r"qwen[-_]?3\.5", "qwen3_coder"),
        (r"nemotron[-_ ]?3[-_ ]?nano", "qwen3_coder"),
        (r"step[-_]?3\.5", "qwen3_coder"),
        (r"step[-_]?3(?![.0-9])", "step3"),
        (r"deepseek[-_ ]?v3[-_.]?1(?![0-9])", "deepseek_v31"),
        (r"deepseek[-_ ]?v(3[-_.]2|4)(?![0-9])", "deepseek_v32"),
        (r"deepseek[-_ ]?(r1|v3)", "deepseek_v3"),  # R1 distills (Qwen, Llama) use R1's template
        (r"qwen[-_]?2\.5|qwen[-_]?3(?![0-9])|qwq", "hermes"),
        (r"hermes|nousresearch", "hermes"),
        (r"kimi[-_ ]?k2", "kimi_k2"),
        (r"glm[-_.]?(?:4[-_.]?[567]|5)(?![0-9])", "glm45"),
        (r"minimax[-_.]?m2", "minimax_m2"),
        (r"gpt[-_.]?oss", "harmony"),
        (r"gemma[-_ ]?4", "gemma4"),
        (r"seed[-_]?oss", "seed_oss"),
        (r"granite[-_ ]?4", "granite4"),
        (r"granite", "granite"),
        (r"mistral|ministral|magistral|devstral|mixtral|codestral|pixtral", "mistral"),
        (r"lfm[-_]?2", "pythonic"),
        (r"llama[-_ ]?4", "pythonic"),
        (r"llama[-_ ]?3(?:\.[0-3])?(?![0-9])", "llama3_json"),
    )
)


def families() -> list[type]:
    """The built-in parser classes, one per family, in registry order."""
    return list(_ALIASES)


class UnknownParserError(ValueError):
    """A parser spec that names no built-in parser, or a plugin that is not a tool parser."""


def known_parser_names() -> list[str]:
    """Sorted built-in parser names and aliases."""
    return sorted(PARSERS)


def family_for_model(model: str | None) -> str | None:
    """The parser family (a :data:`PARSERS` canonical name) for a served model name, or None.

    ``model``: as in the request or the server (``Qwen/Qwen3-8B``, ``deepseek-ai/DeepSeek-V3.1``),
    matched against :data:`MODEL_FAMILIES` in order (``replay formats`` prints the table).
    Unknown names give None: the audit then needs ``--parser``.
    """
    if not model:
        return None
    for pattern, family in MODEL_FAMILIES:
        if pattern.search(model):
            return family
    return None


class _UnknownParserName(UnknownParserError, UnknownNameError):
    """A ``--parser`` spec naming no built-in family and shaped as no plugin (a usage error)."""
