"""SGLang's own request-to-prompt path as a side's renderer (``renderer=sglang:MODEL_DIR``).

Runs in the side's interpreter (``python=`` a venv holding ``sglang``, ``transformers`` and
``jinja2``; ``render_in=python``). For each captured Chat Completions request it does what
SGLang's chat endpoint does between the HTTP body and the prompt token ids:

1. ``ChatCompletionRequest.model_validate(body)`` of ``sglang.srt.entrypoints.openai.protocol``
   (request validation: the ``Tool``/``Function`` models fill every unset field);
2. ``OpenAIServingChat._process_messages(request, is_multimodal=False)`` of
   ``sglang/srt/entrypoints/openai/serving_chat.py``: the tool list the template gets
   (``item.function.model_dump()`` in 0.5.4, ``item.model_dump()`` in 0.5.23), the message
   processing (``content: null`` -> ``""``, string ``arguments`` parsed to objects, the content
   format SGLang detects in the template with ``detect_jinja_template_content_format``) and
   ``_apply_jinja_template`` -> the tokenizer's ``apply_chat_template``.

The serving object is built by its own ``__init__`` with stand-ins for what a running server
would give it, no further than the render path reads: a tokenizer manager holding the real
Hugging Face tokenizer of ``MODEL_DIR`` (its ``tokenizer_config.json`` chat template, or a
``chat_template.jinja`` beside it), a model config whose ``hf_config.model_type`` is
``config.json``'s, and ``None`` for every server argument (no tool-call or reasoning parser, as
``--tool-call-parser`` unset); a template manager with no conversation template (SGLang's Jinja
path) and the content format SGLang's own detector gives. Modules SGLang imports that need torch,
triton, zmq or a GPU and that the render path never calls are served as inert stand-ins
(:func:`install_render_stubs`); the modules the path runs (``protocol``, ``serving_chat``,
``jinja_template_utils``, ``conversation``, transformers' tokenizers) are imported for real and
an import failure there is an error.

The prompt text is what the tokenizer's ``apply_chat_template`` renders with ``tokenize=False``
for the same arguments SGLang passed it (the call is recorded); the token ids are SGLang's own
``prompt_ids``; the tools are the list SGLang handed the template. An Anthropic Messages request
takes SGLang's ``/v1/messages`` conversion first (``AnthropicServing._convert_to_chat_completion_request``,
where the release has it; a render error naming the release where it has not); a Responses
request is not driven (a render error naming the route).

A release the adapter cannot drive (no ``OpenAIServingChat._process_messages``, a missing module
of the path) raises :class:`replay.adapters.AdapterError` in one line naming the release and what
is missing.
"""

from __future__ import annotations

import copy
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

from replay.adapters import AdapterError

#: Third-party packages SGLang's serving modules import at module level and the render path never
#: runs (GPU kernels, IPC): served as inert stand-ins when they are not installed.
HEAVY = ("torch", "triton", "zmq", "PIL", "torchvision", "torch_npu", "sgl_kernel", "flashinfer", "dill", "sentencepiece",
         "compressed_tensors", "aiter", "uvloop", "setproctitle")
#: Modules of the render path: imported for real, a failure is an error (never a stand-in).
STRICT = (
    "sglang.srt.entrypoints.openai.protocol",
    "sglang.srt.entrypoints.openai.serving_chat",
    "sglang.srt.parser.jinja_template_utils",
    "sglang.srt.parser.conversation",
    "sglang.srt.function_call.function_call_parser",
    "sglang.srt.entrypoints.anthropic.serving",
    "sglang.srt.entrypoints.anthropic.protocol",
)


class _Inert:
    """What an attribute of a stand-in module is: callable, subscriptable, iterable as empty,
    false, 0 as a number, a pass-through decorator; never used by the render path."""

    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def __call__(self, *a: Any, **k: Any) -> Any:
        if len(a) == 1 and callable(a[0]) and not k:
            return a[0]
        return _Inert()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()

    def __getitem__(self, key: Any) -> Any:
        return _Inert()

    def __iter__(self) -> Any:
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __int__(self) -> int:
        return 0

    __index__ = __int__

    def __float__(self) -> float:
        return 0.0

    def __len__(self) -> int:
        return 0

    def __mro_entries__(self, bases: Any) -> tuple[type, ...]:
        return (object,)

    def __or__(self, other: Any) -> Any:
        return _Inert()

    __ror__ = __or__

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *a: Any) -> bool:
        return False


def _inert_getattr(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _Inert()


class _StandIn(importlib.abc.Loader):
    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []  # type: ignore[attr-defined]
        module.__version__ = "0"  # type: ignore[attr-defined]
        module.__getattr__ = _inert_getattr  # type: ignore[attr-defined]


#: ``(module, error)`` of each SGLang or transformers module that failed to import and was made a
#: stand-in (kept for the worker's ``init`` answer and for debugging a release).
STOOD_IN: list[tuple[str, str]] = []


class _Lenient(importlib.abc.MetaPathFinder):
    """Serves :data:`HEAVY` packages that are not installed as stand-ins, and runs every other
    ``sglang.*`` / ``transformers.*`` module for real; one outside :data:`STRICT` that raises while
    it imports (it needed torch for real) keeps what it defined and gives a stand-in for the rest."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        top = name.split(".")[0]
        if top in HEAVY:
            if top in sys.modules and not isinstance(getattr(sys.modules[top], "__loader__", None), _StandIn):
                return None
            if name == top and self._real(name, path, target) is not None:
                return None
            return importlib.machinery.ModuleSpec(name, _StandIn(), is_package=True)
        if top not in ("sglang", "transformers") or name in STRICT:
            return None
        spec = self._real(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        real = spec.loader

        class Loader(importlib.abc.Loader):
            def create_module(self, s: Any) -> Any:
                return real.create_module(s)

            def exec_module(self, module: types.ModuleType) -> None:
                try:
                    real.exec_module(module)
                except Exception as exc:  # noqa: BLE001 - a module the render path does not run
                    STOOD_IN.append((module.__name__, f"{type(exc).__name__}: {exc}"[:200]))
                    module.__getattr__ = _inert_getattr  # type: ignore[attr-defined]

        spec.loader = Loader()
        return spec

    def _real(self, name: str, path: Any, target: Any) -> Any:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                return spec
        return None


def install_render_stubs() -> None:
    """Make SGLang's serving modules importable without torch or a GPU: the parser adapter's
    stubs (:func:`replay.adapters.sglang.install_stubs`) and a :class:`_Lenient` finder.
    Idempotent. Raises :class:`replay.adapters.FrameworkMissingError` when sglang is not installed."""
    from replay.adapters.sglang import install_stubs

    install_stubs()
    if not any(isinstance(f, _Lenient) for f in sys.meta_path):
        sys.meta_path.insert(0, _Lenient())


def _release() -> str:
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:  # noqa: BLE001
        return "?"


class _Bag:
    """An object whose attributes not set are None (server arguments a render never sets)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


class _RecordingTokenizer:
    """The model's Hugging Face tokenizer, recording each ``apply_chat_template`` call
    (``(messages, kwargs)``) and the text it renders, so the prompt text and the tools the
    template saw are SGLang's own arguments."""

    def __init__(self, tok: Any) -> None:
        object.__setattr__(self, "_tok", tok)
        object.__setattr__(self, "calls", [])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tok, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._tok, name, value)

    def apply_chat_template(self, conversation: Any, *args: Any, **kwargs: Any) -> Any:
        text_kwargs = {k: v for k, v in kwargs.items() if k not in ("tokenize", "return_dict", "return_tensors")}
        try:
            text = self._tok.apply_chat_template(copy.deepcopy(conversation), *args, tokenize=False, **copy.deepcopy(text_kwargs))
        except Exception:
            self.calls.append((conversation, kwargs, None))
            raise
        self.calls.append((copy.deepcopy(conversation), copy.deepcopy(text_kwargs), text))
        return self._tok.apply_chat_template(conversation, *args, **kwargs)


class SGLangRenderer:
    """SGLang's chat endpoint as a renderer (module docstring). ``model_dir``: a folder with
    ``config.json`` and the tokenizer files (``tokenizer.json``, ``tokenizer_config.json``; a chat
    template in the latter or in ``chat_template.jinja``); no weights.

    Built lazily: nothing of SGLang is imported until the first render, so the object can be
    named in the audit's process. ``renders_requests``: the render stage hands it the whole
    request (:meth:`fill_row`) instead of prepared messages and serialized tools."""

    renders_requests = True
    tools_only = False

    def __init__(self, model_dir: str) -> None:
        self.model_dir = str(Path(model_dir).expanduser().resolve())
        self.name = "sglang"
        self._serving: Any = None
        self._tok: Any = None
        self.release: str | None = None

    # --- setup -------------------------------------------------------------------------------
    def _setup(self) -> None:
        if self._serving is not None:
            return
        if not (Path(self.model_dir) / "config.json").is_file():
            raise AdapterError(f"renderer sglang:{self.model_dir}: no config.json there (the model folder needs config.json and the tokenizer files)")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        install_render_stubs()
        self.release = _release()
        self.name = f"sglang-{self.release}"
        where = f"SGLang {self.release} ({sys.executable})"
        try:
            protocol = importlib.import_module("sglang.srt.entrypoints.openai.protocol")
            serving_chat = importlib.import_module("sglang.srt.entrypoints.openai.serving_chat")
            jtu = importlib.import_module("sglang.srt.parser.jinja_template_utils")
        except ImportError as exc:
            raise AdapterError(f"{where}: cannot drive its chat render path: {exc}") from None
        cls = getattr(serving_chat, "OpenAIServingChat", None)
        missing = [n for n in ("_process_messages", "_apply_jinja_template") if not hasattr(cls, n)]
        if cls is None or missing or not hasattr(protocol, "ChatCompletionRequest"):
            what = "OpenAIServingChat" if cls is None else ", ".join(f"OpenAIServingChat.{n}" for n in missing) or "ChatCompletionRequest"
            raise AdapterError(f"{where}: cannot drive its chat render path: no {what}")
        detect = getattr(jtu, "detect_jinja_template_content_format", None)
        if detect is None:
            raise AdapterError(f"{where}: cannot drive its chat render path: no detect_jinja_template_content_format")
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(self.model_dir)
        template = getattr(tok, "chat_template", None)
        if not template:
            raise AdapterError(f"renderer sglang:{self.model_dir}: the tokenizer has no chat template (put one in tokenizer_config.json or chat_template.jinja)")
        config = json.loads((Path(self.model_dir) / "config.json").read_text(encoding="utf-8"))
        self._tok = _RecordingTokenizer(tok)
        hf_config = _Bag(model_type=config.get("model_type"))
        model_config = _Bag(hf_config=hf_config, is_multimodal=False, get_default_sampling_params=lambda: {})
        server_args = _Bag()
        manager = _Bag(tokenizer=self._tok, model_config=model_config, server_args=server_args,
                       served_model_name=config.get("_name_or_path") or "model", config_value=lambda *a, **k: None)
        template_manager = _Bag(chat_template_name=None, jinja_template_content_format=detect(template), force_reasoning=False)
        for name in ("get_serving", "get_model"):  # 0.5.23: the server's published runtime config
            if hasattr(serving_chat, name):
                setattr(serving_chat, name, lambda: _Bag())
        try:
            self._serving = cls(manager, template_manager)
        except Exception as exc:  # noqa: BLE001
            raise AdapterError(f"{where}: cannot build OpenAIServingChat with replay's stand-ins: {type(exc).__name__}: {exc}") from None
        self._request_cls = protocol.ChatCompletionRequest

    # --- render ------------------------------------------------------------------------------
    def render_request(self, route: str | None, request: dict[str, Any]) -> tuple[str, list[int], list[dict[str, Any]] | None]:
        """``(prompt text, prompt token ids, tools as the template saw them or None)`` of one
        captured request body, through SGLang's own path (module docstring). Raises
        :class:`replay.render.base.RenderError` for what SGLang rejects (a validation error, a
        template error: the server's HTTP 400) and for a route other than Chat Completions;
        :class:`replay.adapters.AdapterError` when the release cannot be driven."""
        from replay.render.base import RenderError

        self._setup()
        body = dict(request)
        body.setdefault("model", "model")
        if route == "messages":
            req = self._from_anthropic(body)
        elif route not in (None, "chat.completions"):
            raise RenderError(f"{self.name}: a {route} request is not a chat completions request (replay drives SGLang's chat and Anthropic Messages paths only)")
        else:
            try:
                req = self._request_cls.model_validate(body)
            except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError: the server's 400
                raise RenderError(f"rejected by {self.name} request validation: {_one_line(exc)}") from None
        self._tok.calls.clear()
        try:
            result = self._serving._process_messages(req, False)
        except Exception as exc:  # noqa: BLE001 - the template raised: the server's 400
            raise RenderError(f"rejected by {self.name}: {type(exc).__name__}: {_one_line(exc)}") from None
        done = [c for c in self._tok.calls if c[2] is not None]
        if not done:
            raise RenderError(f"{self.name}: the request was not rendered by a chat template (no apply_chat_template call)")
        messages, kwargs, text = done[-1]
        ids = getattr(result, "prompt_ids", None)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        ids = [int(i) for i in (ids or [])]
        tools = kwargs.get("tools")
        self._last = (messages, kwargs)
        return text, ids, tools

    def _from_anthropic(self, body: dict[str, Any]) -> Any:
        """An Anthropic Messages body as SGLang's ``/v1/messages`` endpoint turns it into its chat
        request: ``AnthropicMessagesRequest`` validation, then
        ``AnthropicServing._convert_to_chat_completion_request`` (``sglang/srt/entrypoints/anthropic/serving.py``).
        Raises :class:`replay.render.base.RenderError` for a release without that endpoint and for
        what the endpoint rejects (its HTTP 400)."""
        from replay.render.base import RenderError

        try:
            proto = importlib.import_module("sglang.srt.entrypoints.anthropic.protocol")
            serving = importlib.import_module("sglang.srt.entrypoints.anthropic.serving")
            cls, req_cls = serving.AnthropicServing, proto.AnthropicMessagesRequest
            convert = cls._convert_to_chat_completion_request
        except (ImportError, AttributeError) as exc:
            raise RenderError(f"{self.name}: SGLang {self.release} has no Anthropic Messages path replay can drive ({exc})") from None
        try:
            anthropic = req_cls.model_validate(body)
        except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError: the server's 400
            raise RenderError(f"rejected by {self.name} Anthropic request validation: {_one_line(exc)}") from None
        try:
            return convert(cls(self._serving), anthropic)
        except Exception as exc:  # noqa: BLE001 - the endpoint's HTTP 400
            raise RenderError(f"rejected by {self.name} Anthropic conversion: {type(exc).__name__}: {_one_line(exc)}") from None

    def render_tools_variant(self, tools: list[dict[str, Any]] | None) -> str:
        """The last request's prompt text rendered again with ``tools`` in place of the tools
        SGLang handed the template (the same messages and template arguments): how the render
        stage asks whether a leaked null reaches the prompt. Raises what the template raises."""
        messages, kwargs = self._last
        return self._tok._tok.apply_chat_template(copy.deepcopy(messages), tokenize=False, **{**copy.deepcopy(kwargs), "tools": tools})

    def fill_row(self, ex: dict[str, Any], request: dict[str, Any], client_tools: list[Any] | None, row: dict[str, Any], **kw: Any) -> list[int] | None:
        """This exchange's ``renders`` row, filled from :meth:`render_request`
        (:func:`replay.render.framework.framework_row`, which documents the arguments and return)."""
        from replay.render.framework import framework_row

        return framework_row(self, ex, request, client_tools, row, **kw)

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        """The :class:`replay.render.base.Renderer` protocol: ``messages`` and ``tools`` as one
        Chat Completions request through :meth:`render_request`; returns the prompt text."""
        body: dict[str, Any] = {"messages": messages}
        if tools:
            body["tools"] = tools
        return self.render_request("chat.completions", body)[0]


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:500]


__all__ = ["SGLangRenderer", "install_render_stubs", "STOOD_IN", "HEAVY", "STRICT"]
