"""TensorRT-LLM's tool parsers, driven as ``trtllm-serve`` drives them.

Specs: ``trtllm/<name>`` (a key of ``tensorrt_llm.serve.tool_parser.tool_parser_factory.
ToolParserFactory.parsers``) or ``module:attr`` naming a class with ``detect_and_parse(text,
tools)``, ``parse_streaming_increment(delta, tools)`` and ``finish(tools)``, each returning a
``StreamingParseResult`` (``normal_text``, ``calls`` of ``ToolCallItem(tool_index, name,
parameters)``).

The call sequence mirrors ``tensorrt_llm/serve/postprocess_handlers.py`` (TensorRT-LLM main as
stored in 2026, which has ``finish``):

- ``apply_tool_parser``: the parser is made once per choice (``ToolParserFactory.
  create_tool_parser(name)``, a no-argument constructor) and runs only when the request's
  ``tools`` is not None. Non-stream: ``detect_and_parse(text, tools)``; the response carries
  ``normal_text`` as content and each call as ``FunctionCall(name=call.name or "",
  arguments=call.parameters)`` in order. Stream: ``parse_streaming_increment(delta, tools)`` per
  step; on the step whose output has a ``finish_reason``, also ``finish(tools)``, its
  ``normal_text`` and ``calls`` appended to that step's.
- ``chat_stream_post_processor``: each ``ToolCallItem`` becomes a ``DeltaToolCall(index=
  tool_index)`` with the name only when ``call_item.name`` is truthy and ``arguments=
  parameters``; ``finish_reason`` turns ``tool_calls`` once any call was sent.

``tool_choice`` is taken as ``auto`` (the forced-choice paths are not reproduced); the reasoning
parser is not applied. TensorRT-LLM cannot be installed on these machines (the registry holds
only stub packages): the adapter is tested against a class of our own that follows the protocol
(``tests/test_adapters.py``). Request tools become TensorRT-LLM's ``ChatCompletionToolsParam``
when ``tensorrt_llm`` is importable, else :class:`replay.adapters.ToolParam` objects with the same
attributes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from replay.adapters import AdapterError, FrameworkMissingError, FrameworkToolCall, adapter_identity, attribute_tools, bot_eot_tokens
from replay.parsers.base import CallDelta, ParseResult, StreamDelta

_CACHE: dict[Any, type] = {}


def to_trtllm_tools(tools: list[dict[str, Any]] | None) -> list[Any] | None:
    """The request's tools as TensorRT-LLM sees them: None stays None (no tool parsing);
    ``ChatCompletionToolsParam.model_validate`` when importable, else
    :func:`replay.adapters.attribute_tools`.
    Raises ValueError for a tool without ``function.name``."""
    if tools is None:
        return None
    try:
        from tensorrt_llm.serve.openai_protocol import ChatCompletionToolsParam  # type: ignore[import-not-found]
    except Exception:  # not installable here; attribute-compatible stand-ins
        return attribute_tools(tools)
    return [ChatCompletionToolsParam.model_validate(t) for t in tools]


def _registry() -> dict[str, type]:
    try:
        from tensorrt_llm.serve.tool_parser.tool_parser_factory import ToolParserFactory  # type: ignore[import-not-found]
    except Exception as exc:
        raise FrameworkMissingError(f"tensorrt_llm is not importable here ({exc!r}); name a parser class as module:attr instead") from exc
    return dict(ToolParserFactory.parsers)


def adapter_for_name(name: str) -> type:
    """The adapter for ``trtllm/<name>``. Raises :class:`AdapterError` when TensorRT-LLM is not
    importable or has no parser of that name."""
    reg = _registry()
    cls = reg.get(name.lower())
    if cls is None:
        raise AdapterError(f"TensorRT-LLM has no tool parser {name!r}; it has: {', '.join(sorted(reg))}")
    return _make(cls, name.lower())


def adapter_for_class(cls: type, spec: str) -> type:
    """The adapter for a parser class named by ``spec``; its family comes from TensorRT-LLM's
    registry name for the class when TensorRT-LLM is importable, else from none."""
    try:
        reg = _registry()
    except AdapterError:
        reg = {}
    name = next((k for k, v in reg.items() if v is cls), None)
    return _make(cls, name)


def _make(parser_cls: type, registry_name: str | None) -> type:
    key = (parser_cls, registry_name)
    if key in _CACHE:
        return _CACHE[key]
    name, markers = adapter_identity("trtllm", registry_name, parser_cls, bot_eot_tokens(parser_cls))
    adapter = type(
        f"TRTLLM_{parser_cls.__name__}",
        (TRTLLMAdapter,),
        {
            "name": name,
            "markers": markers,
            "parser_class": parser_cls,
            "__doc__": f"TensorRT-LLM tool parser {parser_cls.__qualname__}, as trtllm-serve drives it.",
        },
    )
    _CACHE[key] = adapter
    return adapter


class TRTLLMAdapter:
    """Base of the adapters :func:`adapter_for_class` makes: our tool-parser protocol over one
    TensorRT-LLM parser class, one instance per stream (calls in the module docstring)."""

    name: ClassVar[str] = "trtllm"
    markers: ClassVar[tuple[str, ...]] = ()
    framework: ClassVar[str] = "trtllm"
    parser_class: ClassVar[type]

    def __init__(self, tools: list[dict[str, Any]] | None = None) -> None:
        self._tools = to_trtllm_tools(tools)
        self._parser: Any = None

    def parse(self, text: str) -> ParseResult:
        """``detect_and_parse(text, tools)`` of a new parser: content and calls in order."""
        if self._tools is None:
            return ParseResult(content=text)
        result = self.parser_class().detect_and_parse(text, self._tools)
        calls = tuple(FrameworkToolCall(c.name or "", c.parameters, index=i) for i, c in enumerate(result.calls))
        return ParseResult(content=result.normal_text or "", calls=calls)

    @staticmethod
    def _delta(result: Any) -> StreamDelta:
        return StreamDelta(
            content=result.normal_text or "",
            calls=[CallDelta(index=c.tool_index, name=c.name or None, arguments=c.parameters or "") for c in result.calls],
        )

    def feed(self, delta: str) -> StreamDelta:
        """``parse_streaming_increment(delta, tools)`` of the choice's parser (made at the first step)."""
        if self._tools is None:
            return StreamDelta(content=delta)
        if self._parser is None:
            self._parser = self.parser_class()
        return self._delta(self._parser.parse_streaming_increment(delta, self._tools))

    def finish(self) -> StreamDelta:
        """The finishing step's ``finish(tools)`` (when the class has one and a step was streamed)."""
        if self._tools is None or self._parser is None or not callable(getattr(self._parser, "finish", None)):
            return StreamDelta()
        return self._delta(self._parser.finish(self._tools))
