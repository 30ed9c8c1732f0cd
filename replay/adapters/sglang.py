"""SGLang's tool-call detectors, driven as SGLang's OpenAI server drives them.

Specs: ``sglang/<name>`` (a key of ``FunctionCallParser.ToolCallParserEnum``, SGLang's
``--tool-call-parser`` names: ``qwen25``, ``deepseekv3``, ``kimi_k2`` ...) or ``module:attr`` naming
a detector class (``detect_and_parse`` + ``parse_streaming_increment``).

The call sequence mirrors ``python/sglang/srt/entrypoints/openai/serving_chat.py`` and
``python/sglang/srt/function_call/function_call_parser.py`` of the installed release; two serving
layers are reproduced, told apart by whether ``FunctionCallParser`` has ``parse_stream_end``:

- **0.5.4** (no ``parse_stream_end``). Non-stream: ``OpenAIServingChat._process_tool_calls`` makes
  a ``FunctionCallParser(request.tools, name)``; when ``parser.has_tool_call(text)`` it calls
  ``parser.parse_non_stream(text)`` (the detector's ``detect_and_parse``) and answers each call
  with ``index = call_info.tool_index`` (-1 from the base ``detect_and_parse``); an exception
  leaves the text as content and no calls. Stream: ``_process_tool_call_stream`` makes one
  ``FunctionCallParser`` per choice at its first delta and calls ``parse_stream_chunk(delta)``
  per delta; each ``ToolCallItem`` becomes a delta with ``index = tool_index``, the name when
  ``call_item.name`` is truthy, ``arguments = parameters``. At the step carrying a finish
  reason, ``_check_for_unstreamed_tool_args``: for the last call in
  ``detector.prev_tool_call_arr``, ``json.dumps(arguments, ensure_ascii=False)`` with the
  first occurrence of ``streamed_args_for_tool[i]`` removed (when it occurs) is sent as one more
  arguments delta of index ``i``.
- **0.5.23** (``parse_stream_end``). Non-stream: the same, but a parse that finds no call answers
  with the detector's ``normal_text`` and no calls, and each call's ``index`` is its position.
  Stream: on the finishing step (not an abort), after ``parse_stream_chunk`` it calls
  ``parser.parse_stream_end()`` (the detector's ``finish(tools)``), then
  ``_check_for_unstreamed_tool_args``, which now sends ``expected[len(streamed):]`` when
  ``expected`` starts with what was streamed, and takes string ``arguments`` as they are.
  Tool parsing runs without declared tools when the detector class says
  ``parses_without_tools()``.

Both: without tools (and no ``parses_without_tools``), the text is content, untouched. Request
tools become ``sglang.srt.entrypoints.openai.protocol.Tool`` by ``Tool.model_validate`` (what
request validation does). ``tool_choice`` is taken as ``auto`` (the capture's forced choices take
other server paths, not reproduced); no tokenizer is given to detectors (the server passes its
own to detectors that ask for one); SGLang's reasoning parser is not applied. Our ``finish()``
is the finishing step after the last delta: it feeds no extra empty delta (a recorded chunking
holds the server's empty last step when it had one).

Importing any ``sglang.*`` module runs ``sglang/__init__.py``, which imports torch;
:func:`install_stubs` avoids that (see ``../shared/docs/real-engines.md``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import types
from typing import Any, ClassVar

from replay.adapters import (
    FrameworkMissingError,
    AdapterError,
    FrameworkToolCall,
    adapter_identity,
    bot_eot_tokens,
)
from replay.parsers.base import CallDelta, ParseResult, StreamDelta

_CACHE: dict[Any, type] = {}


class _XgrammarFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``xgrammar`` and ``xgrammar.*`` as modules whose capitalised attributes are
    permissive pydantic models: SGLang's detectors use them only as structural-tag types, which
    a replay never builds. xgrammar itself pulls a CUDA torch."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name == "xgrammar" or name.startswith("xgrammar."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []  # type: ignore[attr-defined]

        def __getattr__(attr: str) -> Any:
            if attr[:1].isupper():
                import pydantic

                model = type(attr, (pydantic.BaseModel,), {"model_config": pydantic.ConfigDict(extra="allow", arbitrary_types_allowed=True)})
                setattr(module, attr, model)
                return model
            raise AttributeError(f"module {module.__name__!r} (a replay stub) has no attribute {attr!r}")

        module.__getattr__ = __getattr__  # type: ignore[attr-defined]


def install_stubs() -> None:
    """Make ``sglang.srt.*`` importable without torch: bare ``sglang`` and ``sglang.srt`` module
    objects whose ``__path__`` is the installed folders (their ``__init__`` files are skipped),
    and an ``xgrammar`` meta-path finder (:class:`_XgrammarFinder`) unless xgrammar is installed.
    Idempotent. Raises :class:`AdapterError` when sglang is not installed in this interpreter."""
    if "sglang" not in sys.modules:  # not imported yet (a real import, if any, is left alone)
        spec = importlib.util.find_spec("sglang")
        if spec is None or not spec.submodule_search_locations:
            raise FrameworkMissingError(f"sglang is not installed in {sys.executable} (pass --old-python/--new-python of a venv that has it)")
        root = list(spec.submodule_search_locations)[0]
        for name, path in (("sglang", root), ("sglang.srt", os.path.join(root, "srt"))):
            mod = types.ModuleType(name)
            mod.__path__ = [path]  # type: ignore[attr-defined]
            mod.__file__ = os.path.join(path, "__init__.py")
            sys.modules[name] = mod
        sys.modules["sglang"].srt = sys.modules["sglang.srt"]  # type: ignore[attr-defined]
    if importlib.util.find_spec("xgrammar") is None and not any(isinstance(f, _XgrammarFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _XgrammarFinder())


def _fcp() -> Any:
    install_stubs()
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    return FunctionCallParser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:  # not installed as a distribution (a source checkout)
        return "unknown"


def registry_names() -> list[str]:
    """SGLang's tool-call parser names in this interpreter (``FunctionCallParser.ToolCallParserEnum``)."""
    return sorted(k for k in _fcp().ToolCallParserEnum if not k.startswith("replay:"))


def adapter_for_name(name: str) -> type:
    """The adapter for ``sglang/<name>``. Raises :class:`AdapterError` for a name SGLang's
    registry lacks (listing those it has)."""
    fcp = _fcp()
    cls = fcp.ToolCallParserEnum.get(name)
    if cls is None:
        raise AdapterError(f"SGLang {_version()} has no tool-call parser {name!r}; it has: {', '.join(registry_names())}")
    return _make(cls, name, name)


def family_adapters() -> dict[str, type]:
    """SGLang's own parser for each of replay's built-in families, in this interpreter's release:
    ``{family: adapter class}`` (a family is a canonical name of
    :data:`replay.parsers.registry.PARSERS`, ``kimi_k2``, ``glm45`` ...). What the side parser
    ``sglang`` (no ``/NAME``) means: "SGLang's parser for each exchange's family", so one side
    covers a capture of many families, as one server release does.

    Each name of SGLang's registry (:func:`registry_names`) is adapted (:func:`adapter_for_name`)
    and its family is the adapter's ``name`` (found through the aliases, as for ``sglang/NAME``);
    names of no built-in family (``sglang.mimo``) are left out. Where several names give one family
    (``qwen``, ``qwen25`` and ``hermes``; ``glm``, ``glm45`` and ``glm47``) the one picked is the
    family's own name, else its first alias in :data:`replay.parsers.registry.PARSERS` order (the
    names vLLM and SGLang document for that format), else the first in sorted order. A family
    SGLang has no parser for in this release is absent (the side's rows of its exchanges then
    carry the worker's "no tool parser family" error). Raises :class:`FrameworkMissingError` when
    sglang is not installed here."""
    from replay.parsers.registry import PARSERS

    rank: dict[str, int] = {}
    for n, key in enumerate(PARSERS):
        rank.setdefault(key, n)
    families = {cls.name for cls in PARSERS.values()}
    best: dict[str, tuple[tuple[int, str], type]] = {}
    for key in registry_names():
        try:
            adapter = adapter_for_name(key)
        except Exception:  # noqa: BLE001 - a registry entry this release cannot build is no family's parser
            continue
        family = str(adapter.name)
        if family not in families:
            continue
        order = (rank.get(key, len(rank)), key)
        if family not in best or order < best[family][0]:
            best[family] = (order, adapter)
    return {family: adapter for family, (_, adapter) in sorted(best.items())}


def adapter_for_class(cls: type, spec: str) -> type:
    """The adapter for a detector class named by ``spec`` (``module:attr``). Its registry name
    (for the family) is that of the nearest registered class in its MRO; an unregistered class is
    registered under ``replay:<spec>`` so ``FunctionCallParser`` can construct it."""
    fcp = _fcp()
    registered = None
    for klass in cls.__mro__:
        for key, value in fcp.ToolCallParserEnum.items():
            if value is klass and not key.startswith("replay:"):
                registered = key
                break
        if registered:
            break
    key = registered if registered and fcp.ToolCallParserEnum[registered] is cls else f"replay:{spec}"
    fcp.ToolCallParserEnum.setdefault(key, cls)
    return _make(cls, key, registered)


def _make(detector_cls: type, key: str, registry_name: str | None) -> type:
    if (detector_cls, key) in _CACHE:
        return _CACHE[(detector_cls, key)]
    fcp = _fcp()
    name, markers = adapter_identity("sglang", registry_name, detector_cls, bot_eot_tokens(detector_cls))
    adapter = type(
        f"SGLang_{detector_cls.__name__}",
        (SGLangAdapter,),
        {
            "name": name,
            "markers": markers,
            "registry_name": key,
            "detector_class": detector_cls,
            "version": _version(),
            "serving": "0.5.23" if hasattr(fcp, "parse_stream_end") else "0.5.4",
            "__doc__": f"SGLang {_version()} detector {detector_cls.__qualname__} ({key}), as its OpenAI server drives it.",
        },
    )
    _CACHE[(detector_cls, key)] = adapter
    return adapter


def to_sglang_tools(tools: list[dict[str, Any]] | None) -> list[Any]:
    """The request's tools (OpenAI dicts) as SGLang's ``Tool`` models (``Tool.model_validate``,
    as request validation builds them); ``[]`` for None. A tool SGLang rejects raises pydantic's
    ValidationError (the server would answer 400)."""
    install_stubs()
    from sglang.srt.entrypoints.openai.protocol import Tool

    return [Tool.model_validate(t) for t in tools or ()]


class SGLangAdapter:
    """Base of the adapter classes :func:`adapter_for_name` makes: our tool-parser protocol over
    one SGLang detector class, one instance per stream (see the module docstring for the calls).

    Class attributes set per adapter: ``name``/``markers`` (:func:`replay.adapters.adapter_identity`),
    ``registry_name`` (the key ``FunctionCallParser`` is built with), ``detector_class``,
    ``version`` (the installed sglang), ``serving`` (``"0.5.4"`` or ``"0.5.23"``: which serving
    layer's sequence is reproduced)."""

    name: ClassVar[str] = "sglang"
    markers: ClassVar[tuple[str, ...]] = ()
    framework: ClassVar[str] = "sglang"
    registry_name: ClassVar[str]
    detector_class: ClassVar[type]
    version: ClassVar[str]
    serving: ClassVar[str]

    def __init__(self, tools: list[dict[str, Any]] | None = None) -> None:
        self._tools = to_sglang_tools(tools)
        without = getattr(self.detector_class, "parses_without_tools", None)
        self._active = bool(self._tools) or (self.serving == "0.5.23" and callable(without) and bool(without()))
        self._parser: Any = None

    def _new_parser(self) -> Any:
        return _fcp()(self._tools, self.registry_name)

    def parse(self, text: str) -> ParseResult:
        """The non-streaming response: content and calls (``FrameworkToolCall`` with the index the
        server sends). Mirrors ``OpenAIServingChat._process_tool_calls`` (tool_choice auto)."""
        if not self._active:
            return ParseResult(content=text)
        parser = self._new_parser()
        if not parser.has_tool_call(text):
            return ParseResult(content=text)
        try:
            normal, items = parser.parse_non_stream(text)
        except Exception:  # the server logs "Tool call parsing error" and answers the text
            return ParseResult(content=text)
        if self.serving == "0.5.23":
            if not items:
                return ParseResult(content=normal or "")
            calls = tuple(FrameworkToolCall(c.name or "", c.parameters, index=i) for i, c in enumerate(items))
        else:
            calls = tuple(FrameworkToolCall(c.name or "", c.parameters, index=c.tool_index) for c in items or ())
        return ParseResult(content=normal or "", calls=calls)

    @staticmethod
    def _deltas(items: Any) -> list[CallDelta]:
        return [CallDelta(index=c.tool_index, name=c.name or None, arguments=c.parameters or "") for c in items or ()]

    def feed(self, delta: str) -> StreamDelta:
        """One streamed step: ``FunctionCallParser.parse_stream_chunk(delta)`` (the parser made at
        the first step), as ``_process_tool_call_stream`` sends it."""
        if not self._active:
            return StreamDelta(content=delta)
        if self._parser is None:
            self._parser = self._new_parser()
        normal, items = self._parser.parse_stream_chunk(delta)
        return StreamDelta(content=normal or "", calls=self._deltas(items))

    def finish(self, *, abort: bool = False) -> StreamDelta:
        """The finishing step: ``parse_stream_end()`` (0.5.23, unless ``abort``), then
        ``_check_for_unstreamed_tool_args`` of this release. Nothing when no step was streamed
        (the server has no parser for the choice then)."""
        if not self._active or self._parser is None:
            return StreamDelta()
        out = StreamDelta()
        if self.serving == "0.5.23" and not abort:
            text, items = self._parser.parse_stream_end()
            out.content = text or ""
            out.calls = self._deltas(items)
        rest = unstreamed_arguments(self._parser.detector, new_rule=self.serving == "0.5.23")
        if rest is not None:
            out.calls.append(CallDelta(index=rest[0], name=None, arguments=rest[1]))
        return out


def unstreamed_arguments(detector: Any, *, new_rule: bool) -> tuple[int, str] | None:
    """``(index, text)`` of the arguments SGLang's ``_check_for_unstreamed_tool_args`` sends at the
    end of a stream, or None. For the last call of ``detector.prev_tool_call_arr``: the expected
    text is ``json.dumps(arguments, ensure_ascii=False)`` (0.5.23: a string is taken as it is);
    0.5.4 sends it with the first occurrence of the streamed text removed when that occurs in it
    (``new_rule`` False), 0.5.23 sends ``expected[len(streamed):]`` when it starts with it."""
    prev = getattr(detector, "prev_tool_call_arr", None)
    streamed = getattr(detector, "streamed_args_for_tool", None)
    if not prev or not streamed:
        return None
    i = len(prev) - 1
    if i < 0 or i >= len(streamed):
        return None
    args = prev[i].get("arguments", {})
    expected = args if new_rule and isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    actual = streamed[i]
    if new_rule:
        rest = expected[len(actual) :] if expected.startswith(actual) else ""
    else:
        rest = expected.replace(actual, "", 1) if actual in expected else ""
    return (i, rest) if rest else None
