"""vLLM's tool parsers, driven as vLLM's OpenAI server drives them.

Specs: ``vllm/<name>`` (a ``ToolParserManager`` name, vLLM's ``--tool-call-parser``: ``hermes``,
``kimi_k2`` ...), optionally ``vllm/<name>?tokenizer=PATH``, or ``module:attr`` naming a
``ToolParser`` subclass (``extract_tool_calls`` + ``extract_tool_calls_streaming``).

A vLLM parser is built on a tokenizer and looks its special tokens up in ``get_vocab()``; the
streaming call also takes token ids. The tokenizer is, in order: ``?tokenizer=PATH`` in the spec,
``$REPLAY_VLLM_TOKENIZER`` (a ``tokenizer.json`` file or a folder ``AutoTokenizer`` loads,
offline), else a **marker tokenizer** (:func:`marker_tokenizer`): byte-level, every char its
bytes, plus the family's markers as special tokens (every built-in family's markers for a
parser of no known family), so that each marker is one id as in the
model's own tokenizer. Token ids of a step are the tokenizer's encoding of that step's text
(``add_special_tokens=False``); the capture's own ids cannot be used, since synthetic chunkings
cut the text anew.

Two serving layers are reproduced, chosen by what the installed vLLM has (``serving``):

**0.33** (``vllm.parser.parser_manager`` and ``vllm/entrypoints/openai/chat_completion/
stream_processor.py`` exist): vLLM's own serving pieces are called. The parser class is
``ParserManager.get_parser(tool_parser_name=NAME, enable_auto_tools=True)`` (a ``module:attr``
class is registered with ``ToolParserManager`` under ``replay:<spec>`` first); per request
``parser_cls(tokenizer, request.tools, model_config=None)``, as ``OpenAIServingChat._make_parser``;
the stream goes through ``ChatStreamProcessor(request, parser, enable_auto_tools=True,
parser_cls=...).step(delta_text, delta_token_ids, finish_reason, prompt_token_ids=[])`` per step, the last step
with ``finish_reason="stop"`` (``Parser.parse_delta`` then appends
``get_remaining_unstreamed_args()`` to the last tool-call delta and flushes engine-based
parsers); the non-stream answer is ``parser.parse(text, request, enable_auto_tools=True,
model_output_token_ids=ids)`` then ``assemble_chat_message_fields``. The tool parser's
``adjust_request`` is applied to the request first.

**0.11** (otherwise): the sequence of ``vllm/entrypoints/openai/serving_chat.py`` of 0.11.0
(``OpenAIServingChat.chat_completion_stream_generator`` and ``chat_completion_full_generator``)
is reproduced here, with ``tool_choice`` auto and a request that declares tools (without tools
the text is content):

- one parser per request, ``parser_cls(tokenizer)``; the request goes through
  ``parser.adjust_request(request)`` first, as ``create_chat_completion`` does;
- per step: ``extract_tool_calls_streaming(previous_text, current_text, delta_text,
  previous_token_ids, current_token_ids, delta_token_ids, request)`` where ``current_text =
  previous_text + delta_text`` and the token-id lists likewise; a ``None`` result sends nothing;
- the finishing step (the last delta: our ``feed`` holds each step's result back by one step so
  that ``finish`` can treat the last one as the server does): when its delta carries tool calls
  and the first has ``function.arguments`` not None, the delta is *replaced* by one arguments
  delta for call ``index = len(prev_tool_call_arr) - 1`` (0 when empty): ``json.dumps(
  prev_tool_call_arr[index].get("arguments", {}), ensure_ascii=False)`` with the first occurrence
  of ``streamed_args_for_tool[index]`` (less the length of the step's own first arguments
  fragment) removed. Content in the replaced delta is lost, as on the server;
- the finishing chunk's ``finish_reason``: ``tool_calls`` when ``len(prev_tool_call_arr) > 0``
  (``auto_tools_called``), else the engine's (``stop`` at a natural end), whatever was streamed;
  ``finish()`` reports it as the side's own (a ``finish_reason`` attribute on what it returns,
  which :func:`replay.stream.replay_stream` and the worker hand to the client assembly; the
  capture's own ``length`` wins for a truncated capture), so that a parser that keeps a call in
  ``prev_tool_call_arr`` and streams none of it is a ``finish-reason`` fault, as its clients see it;
- non-stream: ``extract_tool_calls(text, request)``; with ``tools_called`` the response has its
  ``content`` and ``tool_calls``; without, the text as content, or the parser's ``content`` when
  that is non-empty.

Both: each step is processed one step late (``feed`` holds it) so that the last can be processed
as the finishing step. Not reproduced: the reasoning parser, ``tool_choice`` required/named, Harmony (gpt-oss) token
paths, and a final step that carries no text (an end-of-sequence token alone; the server then
sends an empty delta and skips the check): a recorded chunking with such a step ends with an
empty delta, which is fed like any other.
"""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar

from replay.adapters import AdapterError, FrameworkMissingError, FrameworkToolCall, PlainRequest, adapter_identity, attribute_tools
from replay.parsers.base import CallDelta, ParseResult, StreamDelta

_CACHE: dict[Any, type] = {}
_TOKENIZERS: dict[Any, Any] = {}


def _tool_parsers_module() -> Any:
    """vLLM's tool-parser package: ``vllm.tool_parsers`` (0.33) or
    ``vllm.entrypoints.openai.tool_parsers`` (0.11). Raises :class:`AdapterError` without vLLM."""
    import importlib

    errors = []
    for name in ("vllm.tool_parsers", "vllm.entrypoints.openai.tool_parsers"):
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            errors.append(f"{name}: {exc!r}")
    raise FrameworkMissingError("vLLM's tool parsers are not importable here (" + "; ".join(errors) + ")")


def _manager() -> Any:
    mod = _tool_parsers_module()
    mgr = getattr(mod, "ToolParserManager", None)
    if mgr is None:
        from importlib import import_module

        mgr = import_module(mod.__name__ + ".abstract_tool_parser").ToolParserManager
    return mgr


def _registered(mgr: Any) -> dict[str, Any]:
    """Name -> class (or lazy entry) of every parser the manager knows, across vLLM versions."""
    out: dict[str, Any] = {}
    for attr in ("tool_parsers", "lazy_parsers", "_lazy_parsers"):
        table = getattr(mgr, attr, None)
        if isinstance(table, dict):
            for k, v in table.items():
                out.setdefault(k, v)
    return out


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("vllm")
    except Exception:
        return "unknown"


def adapter_for_name(name: str) -> type:
    """The adapter for ``vllm/<name>[?tokenizer=PATH]``. Raises :class:`AdapterError` for a name
    vLLM's ``ToolParserManager`` does not know (listing those it has)."""
    name, _, query = name.partition("?")
    tokenizer = None
    for part in filter(None, query.split("&")):
        key, _, value = part.partition("=")
        if key != "tokenizer":
            raise AdapterError(f"vllm/{name}: unknown option {key!r} (known: tokenizer=PATH)")
        tokenizer = value
    mgr = _manager()
    try:
        cls = mgr.get_tool_parser(name)
    except KeyError:
        raise AdapterError(f"vLLM {_version()} has no tool parser {name!r}; it has: {', '.join(sorted(_registered(mgr)))}") from None
    return _make(cls, name, tokenizer)


def adapter_for_class(cls: type, spec: str) -> type:
    """The adapter for a ``ToolParser`` subclass named by ``spec``; its family from the name vLLM
    registered it under (the nearest registered class in its MRO), when any."""
    registered = None
    try:
        table = _registered(_manager())
        for klass in cls.__mro__:
            registered = next((k for k, v in table.items() if v is klass), None)
            if registered:
                break
    except AdapterError:
        pass
    return _make(cls, registered, None)


def _serving() -> str:
    """``"0.33"`` when vLLM's ``ParserManager`` and ``ChatStreamProcessor`` are importable, else ``"0.11"``."""
    try:
        from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor  # noqa: F401
        from vllm.parser.parser_manager import ParserManager  # noqa: F401
    except ImportError:
        return "0.11"
    return "0.33"


def check_tokenizer(spec: str, path: str | None, source: str) -> Any:
    """Load the tokenizer at ``path`` (given by ``source``: ``?tokenizer=`` or
    ``$REPLAY_VLLM_TOKENIZER``) when a side is resolved, so that a path that does not exist or
    does not load is an :class:`AdapterError` naming ``spec`` and the path before any work,
    not an error on every row. Returns the tokenizer (None when ``path`` is None)."""
    if not path:
        return None
    if not os.path.exists(path):
        raise AdapterError(f"{spec}: tokenizer {path} (from {source}) does not exist")
    try:
        return load_tokenizer(path)
    except Exception as exc:
        raise AdapterError(f"{spec}: tokenizer {path} (from {source}) does not load: {type(exc).__name__}: {exc}") from None


def _make(parser_cls: type, registry_name: str | None, tokenizer: str | None) -> type:
    key = (parser_cls, registry_name, tokenizer)
    if key in _CACHE:
        return _CACHE[key]
    spec = f"vllm/{registry_name}" if registry_name else f"vllm parser {parser_cls.__qualname__}"
    if tokenizer:
        check_tokenizer(spec, tokenizer, "?tokenizer=")
    else:
        check_tokenizer(spec, os.environ.get("REPLAY_VLLM_TOKENIZER"), "$REPLAY_VLLM_TOKENIZER")
    name, markers = adapter_identity("vllm", registry_name, parser_cls, ())
    serving = _serving() if _vllm_installed() else "0.11"
    manager_name = registry_name
    if serving == "0.33" and (registry_name is None or _manager().get_tool_parser(registry_name) is not parser_cls):
        manager_name = f"replay:{parser_cls.__module__}.{parser_cls.__qualname__}"
        _manager().tool_parsers[manager_name] = parser_cls
    adapter = type(
        f"VLLM_{parser_cls.__name__}",
        (VLLMAdapter,),
        {
            "name": name,
            "markers": markers,
            "registry_name": registry_name,
            "parser_class": parser_cls,
            "tokenizer_path": tokenizer,
            "version": _version(),
            "serving": serving,
            "manager_name": manager_name,
            "__doc__": f"vLLM {_version()} tool parser {parser_cls.__qualname__}, as its OpenAI server drives it.",
        },
    )
    _CACHE[key] = adapter
    return adapter


#: Special tokens every marker tokenizer has besides the family's: common end-of-turn tokens.
COMMON_SPECIAL = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>")


def marker_tokenizer(markers: tuple[str, ...]) -> Any:
    """A transformers fast tokenizer that spells text byte by byte (byte-level BPE without merges,
    256 ids) and holds each of ``markers`` (plus :data:`COMMON_SPECIAL`) as one special token:
    enough for a vLLM parser, which needs its family's special tokens in ``get_vocab()`` and their
    ids in the token-id lists. Cached per marker set. Needs ``tokenizers`` and ``transformers``
    (vLLM's dependencies)."""
    key = tuple(markers)
    if key in _TOKENIZERS:
        return _TOKENIZERS[key]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    fast.add_special_tokens({"additional_special_tokens": list(dict.fromkeys((*markers, *COMMON_SPECIAL)))})
    _TOKENIZERS[key] = fast
    return fast


def load_tokenizer(path: str) -> Any:
    """A tokenizer from ``path``: a ``tokenizer.json`` file (``PreTrainedTokenizerFast``) or a
    folder ``AutoTokenizer.from_pretrained`` loads offline. Cached per path."""
    if path in _TOKENIZERS:
        return _TOKENIZERS[path]
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=path) if path.endswith(".json") else AutoTokenizer.from_pretrained(path, local_files_only=True)
    _TOKENIZERS[path] = tok
    return tok


def _vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def _request(tools: list[dict[str, Any]] | None) -> Any:
    """A ``ChatCompletionRequest`` declaring ``tools`` (tool_choice auto), from wherever this vLLM
    keeps it; a :class:`replay.adapters.PlainRequest` when vLLM is not installed (a class of the
    vLLM protocol that is not vLLM's own)."""
    import importlib

    if not _vllm_installed():
        return PlainRequest(tools=attribute_tools(tools) if tools else None, tool_choice="auto" if tools else None)

    for name in ("vllm.entrypoints.openai.protocol", "vllm.entrypoints.openai.chat_completion.protocol"):
        try:
            cls = importlib.import_module(name).ChatCompletionRequest
            break
        except (ImportError, AttributeError):
            continue
    else:
        raise AdapterError("vLLM's ChatCompletionRequest is not importable here")
    body: dict[str, Any] = {"model": "replay", "messages": [{"role": "user", "content": "replay"}]}
    if tools:
        body["tools"] = tools
        body["tool_choice"] = "auto"
    return cls.model_validate(body)


class VLLMAdapter:
    """Base of the adapters :func:`adapter_for_name` makes: our tool-parser protocol over one vLLM
    ``ToolParser`` class, one instance per stream (calls in the module docstring).

    Class attributes set per adapter: ``name``/``markers``, ``registry_name``, ``parser_class``,
    ``tokenizer_path`` (from the spec), ``version`` (the installed vllm)."""

    name: ClassVar[str] = "vllm"
    markers: ClassVar[tuple[str, ...]] = ()
    framework: ClassVar[str] = "vllm"
    registry_name: ClassVar[str | None] = None
    parser_class: ClassVar[type]
    tokenizer_path: ClassVar[str | None] = None
    version: ClassVar[str] = "unknown"
    serving: ClassVar[str] = "0.11"
    manager_name: ClassVar[str | None] = None

    def __init__(self, tools: list[dict[str, Any]] | None = None) -> None:
        self._active = bool(tools)
        self._tok = self.tokenizer()
        self._request = _request(tools)
        self._parser: Any = None
        self._prev_text = ""
        self._prev_ids: list[int] = []
        self._held: Any = None  # 0.11: the last step's DeltaMessage (or None), not yet sent
        self._pending: str | None = None  # 0.33: the last step's text, not yet processed
        self._processor: Any = None
        self._steps = 0

    @classmethod
    def tokenizer(cls) -> Any:
        """The tokenizer the parser is built on (see the module docstring for the order)."""
        path = cls.tokenizer_path or os.environ.get("REPLAY_VLLM_TOKENIZER")
        if path:
            return load_tokenizer(path)
        if cls.markers:
            return marker_tokenizer(tuple(cls.markers))
        from replay.parsers.registry import families

        return marker_tokenizer(tuple(dict.fromkeys(m for f in families() for m in f.markers)))

    def _new_parser(self) -> Any:
        parser = self.parser_class(self._tok)
        adjust = getattr(parser, "adjust_request", None)
        if callable(adjust):
            self._request = adjust(request=self._request)
        return parser

    def _parser_cls_033(self) -> Any:
        from vllm.parser.parser_manager import ParserManager

        return ParserManager.get_parser(tool_parser_name=self.manager_name, enable_auto_tools=True, model_name="replay")

    def _new_parser_033(self) -> Any:
        parser = self._parser_cls_033()(self._tok, self._request.tools, model_config=None)
        tool_parser = getattr(parser, "_tool_parser", None)
        adjust = getattr(tool_parser, "adjust_request", None)
        if callable(adjust):
            self._request = adjust(self._request)
        return parser

    def _parse_033(self, text: str) -> ParseResult:
        from vllm.entrypoints.openai.chat_completion.message_assembly import assemble_chat_message_fields

        parser = self._new_parser_033()
        reasoning, content, tool_calls = parser.parse(text, self._request, enable_auto_tools=True, model_output_token_ids=self._ids(text))
        fields = assemble_chat_message_fields(self._request, reasoning, content, tool_calls, enable_auto_tools=True, parser_cls=self._parser_cls_033())
        calls = tuple(
            FrameworkToolCall(c.function.name or "", c.function.arguments if c.function.arguments is not None else "", index=i)
            for i, c in enumerate(fields.tool_calls or ())
        )
        return ParseResult(content=fields.content or "", calls=calls, reasoning="")

    def _step_033(self, delta: str, finish_reason: str | None) -> StreamDelta:
        if self._processor is None:
            from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor

            self._processor = ChatStreamProcessor(self._request, self._new_parser_033(), enable_auto_tools=True, parser_cls=self._parser_cls_033())
        # the server passes the request's prompt ids on every chunk; a replay has none: [] (not
        # None, which would leave the parser waiting for the end of a reasoning section)
        step = self._processor.step(delta, self._ids(delta), finish_reason, [])
        return self._to_delta(step.delta)

    def _ids(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False)) if text else []

    def parse(self, text: str) -> ParseResult:
        """``extract_tool_calls(text, request)`` of a new parser, answered as
        ``chat_completion_full_generator`` answers it."""
        if not self._active:
            return ParseResult(content=text)
        if self.serving == "0.33":
            return self._parse_033(text)
        info = self._new_parser().extract_tool_calls(text, request=self._request)
        if not info.tools_called:
            return ParseResult(content=info.content if info.content else text)
        calls = tuple(
            FrameworkToolCall(c.function.name or "", c.function.arguments if c.function.arguments is not None else "", index=i)
            for i, c in enumerate(info.tool_calls or ())
        )
        return ParseResult(content=info.content or "", calls=calls)

    @staticmethod
    def _to_delta(message: Any) -> StreamDelta:
        out = StreamDelta()
        if message is None:
            return out
        out.content = getattr(message, "content", None) or ""
        out.reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None) or ""
        for tc in getattr(message, "tool_calls", None) or ():
            fn = tc.function
            if isinstance(fn, dict):
                name, args = fn.get("name"), fn.get("arguments")
            else:
                name, args = (getattr(fn, "name", None), getattr(fn, "arguments", None)) if fn is not None else (None, None)
            out.calls.append(CallDelta(index=tc.index, name=name or None, arguments=args or ""))
        return out

    def feed(self, delta: str) -> StreamDelta:
        """One streamed step through ``extract_tool_calls_streaming``; returns the previous step's
        delta (each is held one step, so that the last can be finished as the server does)."""
        if not self._active:
            return StreamDelta(content=delta)
        if self.serving == "0.33":
            out = self._step_033(self._pending, None) if self._pending is not None else StreamDelta()
            self._pending = delta
            self._steps += 1
            return out
        if self._parser is None:
            self._parser = self._new_parser()
        delta_ids = self._ids(delta)
        current_text = self._prev_text + delta
        current_ids = self._prev_ids + delta_ids
        message = self._parser.extract_tool_calls_streaming(
            previous_text=self._prev_text,
            current_text=current_text,
            delta_text=delta,
            previous_token_ids=self._prev_ids,
            current_token_ids=current_ids,
            delta_token_ids=delta_ids,
            request=self._request,
        )
        self._prev_text, self._prev_ids = current_text, current_ids
        out = self._to_delta(self._held) if self._steps else StreamDelta()
        self._held = message
        self._steps += 1
        return out

    def finish(self) -> StreamDelta:
        """The finishing step: the last step's delta, replaced by the remaining-arguments delta when
        it carries tool-call arguments (``chat_completion_stream_generator``'s check)."""
        if not self._active or not self._steps:
            return StreamDelta()
        if self.serving == "0.33":
            pending, self._pending = self._pending, None
            return self._step_033(pending or "", "stop")
        message, self._held = self._held, None
        parser = self._parser
        out = self._finish_011(message, parser)
        # chat_completion_stream_generator: finish_reason=output.finish_reason if not
        # auto_tools_called else "tool_calls", auto_tools_called = len(prev_tool_call_arr) > 0
        out.finish_reason = "tool_calls" if len(getattr(parser, "prev_tool_call_arr", None) or ()) > 0 else "stop"  # type: ignore[attr-defined]
        return out

    def _finish_011(self, message: Any, parser: Any) -> StreamDelta:
        """0.11's finishing delta: ``message`` (the held last step) as it is, or replaced by the
        remaining-arguments delta when its first tool call carries arguments."""
        calls = getattr(message, "tool_calls", None) if message is not None else None
        first = calls[0] if calls else None
        fn = getattr(first, "function", None) if first is not None else None
        args = (fn.get("arguments") if isinstance(fn, dict) else getattr(fn, "arguments", None)) if fn is not None else None
        if args is None:
            return self._to_delta(message)
        called = len(parser.prev_tool_call_arr) > 0
        index = len(parser.prev_tool_call_arr) - 1 if called else 0
        expected = json.dumps(parser.prev_tool_call_arr[index].get("arguments", {}), ensure_ascii=False)
        actual = parser.streamed_args_for_tool[index]
        latest = len(args) if isinstance(args, str) else 0
        if latest > 0:
            actual = actual[:-latest]
        return StreamDelta(calls=[CallDelta(index=index, name=None, arguments=expected.replace(actual, "", 1))])
