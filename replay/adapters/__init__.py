"""Adapters: a serving framework's own tool-parser class, driven as that framework's server drives it.

A user names their framework's class as a side (``--old-parser``, ``--new-parser``, usually with
``--old-python``/``--new-python`` pointing at the framework's venv) in one of two ways:

- a shorthand with the framework's own registry name: ``sglang/<name>`` (SGLang's
  ``--tool-call-parser`` names: ``qwen25``, ``deepseekv3``, ``kimi_k2`` ...), ``vllm/<name>``
  (vLLM's ``ToolParserManager`` names: ``hermes``, ``kimi_k2`` ...), ``trtllm/<name>``
  (TensorRT-LLM's ``ToolParserFactory`` names);
- ``module:attr`` / ``file.py:attr`` naming the class; it is recognised by its protocol
  (:func:`protocol_of`): vLLM's ``extract_tool_calls`` + ``extract_tool_calls_streaming``;
  SGLang's ``detect_and_parse`` + ``parse_streaming_increment``; TensorRT-LLM's, which adds
  ``finish``. A class defined in a ``tensorrt_llm`` module is TensorRT-LLM's, one in an
  ``sglang`` module SGLang's (recent SGLang detectors have a ``finish`` too).

Each adapter is a class following :class:`replay.parsers.base.ToolParser`, made once per framework
class (:func:`adapt`); its ``parse``/``feed``/``finish`` make the calls the framework's OpenAI
server makes for a non-streaming response, for each streamed step, and at the end of the stream
(each framework module's docstring cites the server code it mirrors). Its ``name`` is the
built-in family the framework parser implements (``sglang/qwen25`` -> ``hermes``), found through
the aliases in :data:`replay.parsers.registry.PARSERS`, so that such a side replaces only that family's
parser; a framework parser of no known family gets the name ``<framework>.<name>`` and replaces
every family's. Its ``markers`` are that family's (both sides then cut a completion alike), or the
framework parser's own start and end tokens when it has no family.

This package and its framework modules import only the standard library at import time: they
run inside the framework's venv as an out-of-process side (``python -m replay.worker``), where
nothing but the framework and its dependencies is installed. A framework is imported only when a
spec naming it is resolved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replay.parsers.base import ToolCall
from replay.plugins import FRAMEWORK_PREFIXES, is_framework_spec  # noqa: F401  (is_framework_spec: part of this package's API)

#: Shorthand prefixes -> framework module names in this package (the spec syntax lives with the
#: other side-spec forms, in :mod:`replay.plugins`).
PREFIXES = FRAMEWORK_PREFIXES


class AdapterError(ValueError):
    """A framework spec that cannot be resolved: the framework is not importable here, the name
    is not in its registry, or the class follows no known protocol. The message says which."""


class FrameworkMissingError(AdapterError):
    """The framework a spec names (``sglang/NAME``, ``vllm/NAME``, ``trtllm/NAME``) is not
    importable in this interpreter: run that side where it is (``--old-python``/``--new-python``),
    or, for the reference side, which runs in the ``replay`` process, run ``replay`` there."""


@dataclass(frozen=True)
class FrameworkToolCall(ToolCall):
    """A call of a framework's whole-text parse, with the ``index`` its server put on it in the
    non-streaming response (SGLang 0.5.4 sends each call's ``tool_index``, -1 from
    ``detect_and_parse``; later releases send the call's position). The audit reads ``name`` and
    ``arguments`` as of any :class:`ToolCall` (calls are judged by position, as a client of a
    non-streaming response reads them); ``index`` is there for a reader and the tests."""

    index: int = 0


@dataclass
class FunctionParam:
    """A tool's ``function`` with attribute access (``tool.function.name``), as the frameworks'
    pydantic request models give it."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


@dataclass
class ToolParam:
    """A request tool with attribute access, for a framework parser class whose framework's own
    request model is not importable (TensorRT-LLM here; the test doubles)."""

    function: FunctionParam
    type: str = "function"
    extra: dict[str, Any] = field(default_factory=dict)


def attribute_tools(tools: list[dict[str, Any]]) -> list[ToolParam]:
    """OpenAI tool dicts as :class:`ToolParam` objects. Raises ValueError (naming the tool's
    position) for a tool without a string ``function.name``."""
    out = []
    for i, t in enumerate(tools):
        fn = (t or {}).get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ValueError(f"tool {i} has no function.name")
        out.append(
            ToolParam(
                function=FunctionParam(fn["name"], fn.get("description"), fn.get("parameters"), fn.get("strict")),
                type=t.get("type", "function"),
                extra={k: v for k, v in t.items() if k not in ("type", "function")},
            )
        )
    return out


@dataclass
class PlainRequest:
    """A chat request with attribute access (``request.tools``, ``request.tool_choice``), for a
    vLLM-protocol class when vLLM's ``ChatCompletionRequest`` is not importable (test doubles)."""

    tools: list[ToolParam] | None
    tool_choice: str | None = "auto"
    model: str = "replay"


def resolve(spec: str) -> type:
    """The adapter class for a shorthand spec ``<framework>/<name>``.

    Imports the framework (SGLang with the stubs of :func:`replay.adapters.sglang.install_stubs`).
    Raises :class:`FrameworkMissingError` (an :class:`AdapterError`) when the framework is not
    installed in this interpreter, :class:`AdapterError` when the name is not in its registry
    (the message lists the names it has)."""
    for prefix, module in PREFIXES.items():
        if spec.startswith(prefix):
            name = spec[len(prefix) :]
            mod = _framework_module(module)
            return mod.adapter_for_name(name)
    raise AdapterError(f"{spec!r} is not a framework parser spec (sglang/NAME, vllm/NAME, trtllm/NAME)")


#: Bare framework names a side's parser may be: that framework's own parser for each exchange's
#: family (:func:`family_parsers`). Only SGLang has a per-family table so far.
PER_FAMILY: dict[str, str] = {"sglang": "sglang"}


def is_per_family_spec(spec: Any) -> bool:
    """Whether a parser spec is a bare framework name of :data:`PER_FAMILY` (``sglang``)."""
    return isinstance(spec, str) and spec.strip().lower() in PER_FAMILY


def family_parsers(spec: Any) -> dict[str, type] | None:
    """``{family: adapter class}`` for a bare framework spec (``sglang``: SGLang's parser for each
    of replay's families, :func:`replay.adapters.sglang.family_adapters`); None for any other spec
    (``sglang/NAME``, a built-in, a plugin). Raises :class:`FrameworkMissingError` when the
    framework is not installed in this interpreter."""
    if not is_per_family_spec(spec):
        return None
    return _framework_module(PER_FAMILY[spec.strip().lower()]).family_adapters()


def per_family_parser(spec: str, family: str | None = None) -> Any:
    """The parser a bare framework spec (``sglang``) gives ``family``: that framework's adapter
    for it (:func:`family_parsers`); with ``family`` None, the whole ``{family: adapter}`` table
    (what checking the spec up front resolves). Raises :class:`AdapterError` (a ValueError) when
    the framework has no parser for ``family`` in this release, or ``spec`` is no bare framework
    name; :class:`FrameworkMissingError` when the framework is not installed here."""
    table = family_parsers(spec)
    if table is None:
        raise AdapterError(f"{spec!r} is not a bare framework name ({', '.join(PER_FAMILY)})")
    if family is None:
        return table
    if family not in table:
        raise AdapterError(f"{spec}: this release has no tool parser for the {family} family (it has: {', '.join(table) or 'none'})")
    return table[family]


def before_plugin_import(spec: str) -> None:
    """Prepare the interpreter to import the module a ``module:attr`` or ``file.py:attr`` spec
    names: where sglang is installed without torch and not imported yet, SGLang's import stubs go
    in first (a module under ``sglang``, or a user's file subclassing a detector, would otherwise
    run ``sglang/__init__.py``, which imports torch). Nothing happens elsewhere."""
    import importlib.util
    import sys

    if "sglang" in sys.modules:
        return
    try:
        has_sglang = importlib.util.find_spec("sglang") is not None
        has_torch = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return
    target = spec.rpartition(":")[0]
    if has_sglang and (not has_torch or target == "sglang" or target.startswith("sglang.")):
        _framework_module("sglang").install_stubs()


def protocol_of(obj: Any, spec: str = "") -> str | None:
    """Which framework protocol a class follows: ``"vllm"``, ``"sglang"``, ``"trtllm"`` or None.

    vLLM: ``extract_tool_calls`` and ``extract_tool_calls_streaming``. SGLang: ``detect_and_parse``
    and ``parse_streaming_increment``; TensorRT-LLM: the same plus ``finish``. Between the last
    two, a class with a base defined in a ``sglang.*`` or ``tensorrt_llm.*`` module (a user's
    subclass of a detector), or named through such a module by ``spec``, is that framework's;
    otherwise ``finish`` decides."""
    if not isinstance(obj, type):
        return None
    if callable(getattr(obj, "extract_tool_calls", None)) and callable(getattr(obj, "extract_tool_calls_streaming", None)):
        return "vllm"
    if callable(getattr(obj, "detect_and_parse", None)) and callable(getattr(obj, "parse_streaming_increment", None)):
        modules = [getattr(k, "__module__", "") or "" for k in obj.__mro__] + [spec.rpartition(":")[0]]
        if any(m.startswith("tensorrt_llm") for m in modules):
            return "trtllm"
        if any(m.startswith("sglang") for m in modules):
            return "sglang"
        return "trtllm" if callable(getattr(obj, "finish", None)) else "sglang"
    return None


def adapt(obj: Any, spec: str = "") -> type | None:
    """The adapter class for a framework parser class ``obj`` (loaded from ``spec``), or None when
    ``obj`` follows no framework protocol (:func:`protocol_of`)."""
    kind = protocol_of(obj, spec)
    if kind is None:
        return None
    return _framework_module(kind).adapter_for_class(obj, spec or f"{obj.__module__}:{obj.__qualname__}")


def family_class(*names: str) -> type | None:
    """The built-in parser class for the first of ``names`` that is a built-in name or alias
    (:data:`replay.parsers.registry.PARSERS` holds vLLM's and SGLang's names for each family), or None."""
    from replay.parsers.registry import PARSERS

    for name in names:
        cls = PARSERS.get(str(name).strip().lower())
        if cls is not None:
            return cls
    return None


def adapter_identity(framework: str, registry_name: str | None, framework_cls: type, own_tokens: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """``(name, markers)`` for an adapter class: the family's name and markers when the framework
    parser implements a built-in family (by its registry name), so that the old and new sides cut
    a completion the same way; else ``<framework>.<name>`` and the framework parser's own start and
    end tokens, whitespace stripped (``own_tokens``; empty ones dropped)."""
    family = family_class(registry_name) if registry_name else None
    if family is not None:
        return family.name, tuple(family.markers)
    own = tuple(dict.fromkeys(t.strip() for t in own_tokens if isinstance(t, str) and len(t.strip()) > 1))
    label = registry_name or framework_cls.__name__
    return f"{framework}.{label}", own


def bot_eot_tokens(parser_cls: type) -> tuple[str, ...]:
    """``(bot_token, eot_token)`` of an instance of ``parser_cls`` made without arguments, as
    SGLang detectors and TensorRT-LLM tool parsers declare them (empty strings when absent), for
    :func:`adapter_identity`'s ``own_tokens``; ``()`` when the class needs constructor arguments."""
    try:
        probe = parser_cls()
        return (str(getattr(probe, "bot_token", "") or ""), str(getattr(probe, "eot_token", "") or ""))
    except Exception:  # a parser that needs constructor arguments: no own tokens
        return ()


def _framework_module(name: str) -> Any:
    import importlib

    return importlib.import_module(f"replay.adapters.{name}")
