"""The tool-parser protocol every family module follows, and the types it speaks.

A tool parser turns a model's raw completion (text with its special tokens) into content and tool
calls, two ways:

- **whole-text parse** ``parse(text) -> ParseResult``: the non-streaming path (vLLM
  ``extract_tool_calls``, SGLang ``detect_and_parse``);
- **streaming parse**: ``feed(delta) -> StreamDelta`` once per streamed step, then ``finish() ->
  StreamDelta`` once at the end of the stream (SGLang's ``parse_streaming_increment`` and its
  end-of-stream hook; vLLM's ``extract_tool_calls_streaming`` plus the serving layer's final flush).
  ``finish()`` must report every complete call still buffered and release held-back text.

A streaming parser is one object per stream: construct a new one for each replay. The events a
parser yields are judged on what a client builds from them (:func:`replay.stream.assemble_openai`,
:mod:`replay.assemble`): the OpenAI Python SDK concatenates every string field of a tool-call
delta by ``index``, ``function.arguments`` and a ``name`` or ``id`` sent twice alike.

Parsers *raise* on faults of their own (a bug, an impossible state); malformed model output is not
a fault: it is handled as the family's reference implementation handles it, and documented in the
family's module. The pipeline catches exceptions per exchange and records them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a whole-text parse.

    ``name``: the function name. ``arguments``: JSON text of the arguments object, as the upstream
    parsers return it (``json.dumps(obj, ensure_ascii=False)``, default separators).
    """

    name: str
    arguments: str


@dataclass(frozen=True)
class ParseResult:
    """What a whole-text parse returns: the content a client sees, the calls in order, and the
    reasoning text split off before them (``<think>...</think>``, Harmony's analysis channel; the
    ``reasoning_content`` of vLLM/SGLang responses), empty when the family or output has none."""

    content: str
    calls: tuple[ToolCall, ...] = ()
    reasoning: str = ""


@dataclass(frozen=True)
class CallDelta:
    """One tool-call delta of a streamed step, as in ``choices[0].delta.tool_calls[]``.

    ``index``: position of the call in the response (0, 1, 2 ...). ``name``: set on a call's first
    delta only. ``arguments``: the next fragment of the arguments' JSON text (may be empty).
    ``id``: the call id, when the parser makes its own (vLLM's parsers do); None lets the serving
    layer give the call's opening delta one (:func:`replay.assemble.chunks_from_events`). An id on
    more than one delta of a call is sent as such (the client concatenates it).
    """

    index: int
    name: str | None = None
    arguments: str = ""
    id: str | None = None


@dataclass
class StreamDelta:
    """What one ``feed``/``finish`` call yields: a content fragment, tool-call deltas, and a
    reasoning fragment (``delta.reasoning_content`` in vLLM/SGLang streams)."""

    content: str = ""
    calls: list[CallDelta] = field(default_factory=list)
    reasoning: str = ""

    def __bool__(self) -> bool:
        return bool(self.content or self.calls or self.reasoning)


@runtime_checkable
class ToolParser(Protocol):
    """The protocol: a class with these members, constructed once per stream.

    Class attributes:
      ``name``: the family's registry name (``hermes``, ``deepseek_v31``).
      ``markers``: the family's special tokens. A real server never splits one across two
      deltas, so synthetic chunkings do not cut inside them (except ``char-raw``).
      ``end_tokens`` (built-in families; optional for plugins): the end-of-turn / end-of-sequence
      tokens removed from the raw text in both paths before parsing, as servers never show them
      (``replay formats`` lists them).
      ``call_starts`` (built-in families; optional for plugins): the distinctive markers that open
      a call or a call section in this family's syntax (``<tool_call>``, ``[TOOL_CALLS]``), never
      generic text such as ``[`` or ``{``. :mod:`replay.family_fit` looks for them to tell when a
      completion holds another family's calls than the one its model name picks.

    ``__init__(tools)`` takes the request's tool declarations (a list of OpenAI tool dicts, or
    None), for families whose parse depends on the declared schema. Families that split off
    reasoning also accept the keyword ``reasoning_open=True``: the generation prompt already
    opened the reasoning section (it ends with ``<think>``), so the output starts inside it.
    """

    name: ClassVar[str]
    markers: ClassVar[tuple[str, ...]]

    def __init__(self, tools: list[dict[str, Any]] | None = None) -> None: ...

    def parse(self, text: str) -> ParseResult: ...

    def feed(self, delta: str) -> StreamDelta: ...

    def finish(self) -> StreamDelta: ...
