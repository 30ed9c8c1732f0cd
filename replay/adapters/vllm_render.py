"""vLLM's own request-to-prompt path as a side's renderer (``renderer=vllm:MODEL_DIR``).

Runs in the side's interpreter (``python=`` a venv holding ``vllm`` and its CPU dependencies,
``llguidance`` included: ``python tests/engines.py vllm-render==X``; ``render_in=python``). For
each captured Chat Completions request it does what vLLM's GPU-less render server
(``vllm/entrypoints/launchers/render/``) does between the HTTP body and the engine input:

1. ``ChatCompletionRequest.model_validate(body)`` of
   ``vllm.entrypoints.openai.chat_completion.protocol`` (request validation);
2. ``OnlineRenderer.render_chat(request)`` of ``vllm/renderers/online_renderer.py``: the tool
   dicts (``tool.model_dump()``), ``parse_chat_messages`` and the chat template through the
   tokenizer's ``apply_chat_template``; the engine input holds the prompt text and token ids.

The renderer is built as the render server's ``init_render_app_state`` builds it, from its own
argument parser (``--model MODEL_DIR --enable-auto-tool-choice --tool-call-parser hermes``: a
captured ``tool_choice: auto`` needs a tool parser configured, and the parser does not take part
in rendering); the one stand-in is the ``VllmConfig`` handed to ``renderer_from_config``: the
real ``ModelConfig`` and a default ``ParallelConfig`` (a whole ``VllmConfig`` checks the platform,
and vLLM on an x86 CPU wants triton-cpu, which renders nothing). ``VLLM_TARGET_DEVICE`` is set to
``cpu`` when unset. The tools the template saw are recorded from the tokenizer's
``apply_chat_template`` call.

Releases before the ``OnlineRenderer`` (0.11: no ``vllm.renderers``) are driven through the
path their chat endpoint took, ``OpenAIServingChat.create_chat_completion`` of
``vllm/entrypoints/openai/serving_chat.py``, built as that release's ``init_app_state`` builds it
(the same arguments): request validation by ``vllm.entrypoints.openai.protocol``'s
``ChatCompletionRequest``, the tool dicts as that request model dumps them
(``[tool.model_dump() for tool in request.tools]``), then ``OpenAIServing._preprocess_chat``
(``resolve_chat_template_content_format``, ``parse_chat_messages_futures`` and
``apply_hf_chat_template`` of ``vllm/entrypoints/chat_utils.py``, the prompt tokenized with the
request's ``add_special_tokens``). The endpoint is stopped when ``_preprocess_chat`` returns
(nothing reaches an engine: the engine client is a stand-in answering ``get_tokenizer`` with the
tokenizer ``init_tokenizer_from_configs`` builds, as the release's ``AsyncLLM`` does), and the
served model name is the captured request's model (as ``--served-model-name`` would make it).
The adapter tells the two paths apart by what the release has (``vllm.renderers.online_renderer``
first); a release with neither is a one-line :class:`replay.adapters.AdapterError` naming the
release and what is missing. Anthropic Messages and Responses requests get a render error
naming the route.
"""

from __future__ import annotations

import asyncio
import atexit
import copy
import importlib
import os
import sys
from pathlib import Path
from typing import Any

from replay.adapters import AdapterError


def _release() -> str:
    try:
        from importlib.metadata import version

        return version("vllm")
    except Exception:  # noqa: BLE001
        return "?"


def _has_module(name: str) -> bool:
    """Whether the installed vLLM has module ``name`` (its parent packages imported to find it)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a parent package is missing
        return False


def _cpu_platform_when_unspecified() -> None:
    """Give a vLLM without a detected platform (0.11 on a machine without an accelerator, from a
    wheel whose version lacks ``+cpu``: its ``UnspecifiedPlatform``, on which the argument parser's
    ``DeviceConfig`` default raises) the ``CpuPlatform`` a CPU build of the same release selects
    (``vllm/platforms/__init__.py``'s ``cpu_platform_plugin``). The platform decides devices and
    dtypes, which take no part in the prompt. Leaves a detected platform alone."""
    platforms = importlib.import_module("vllm.platforms")
    if getattr(platforms.current_platform, "device_type", None):
        return
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still pending on ``loop`` (the async tokenizer's batching task), finish its
    async generators and close it, so that the interpreter's exit prints no pending-task noise."""
    if loop.is_closed():
        return
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


class _Preprocessed(Exception):  # noqa: N818 - not an error: stops the 0.11 chat endpoint when its prompt is built
    """Raised from ``_preprocess_chat`` with its result, so nothing reaches an engine; not one of the
    exception types ``create_chat_completion`` turns into an error response."""

    def __init__(self, result: Any) -> None:
        super().__init__("prompt built")
        self.result = result


class VLLMRenderer:
    """vLLM's render server path as a renderer (module docstring). ``model_dir``: a folder with
    ``config.json`` and the tokenizer files with a chat template; no weights. Built lazily as
    :class:`replay.adapters.sglang_render.SGLangRenderer` is; its row is filled by
    :func:`replay.render.framework.framework_row` (:meth:`fill_row`)."""

    renders_requests = True
    tools_only = False

    def __init__(self, model_dir: str) -> None:
        self.model_dir = str(Path(model_dir).expanduser().resolve())
        self.name = "vllm"
        self.release: str | None = None
        self._online: Any = None  # a release with OnlineRenderer (0.33)
        self._chat: Any = None  # before OnlineRenderer: OpenAIServingChat
        self._last: tuple[Any, dict[str, Any]] | None = None
        self._calls: list[tuple[Any, dict[str, Any]]] = []

    def _setup(self) -> None:
        if self._online is not None or self._chat is not None:
            return
        if not (Path(self.model_dir) / "config.json").is_file():
            raise AdapterError(f"renderer vllm:{self.model_dir}: no config.json there (the model folder needs config.json and the tokenizer files)")
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        self.release = _release()
        self.name = f"vllm-{self.release}"
        where = f"vLLM {self.release} ({sys.executable})"
        if _has_module("vllm.renderers.online_renderer"):
            self._setup_online(where)
        elif _has_module("vllm.entrypoints.openai.serving_chat"):
            self._setup_serving_chat(where)
        else:
            raise AdapterError(f"{where}: cannot drive its render path: neither vllm.renderers.online_renderer "
                               "(OnlineRenderer.render_chat) nor vllm.entrypoints.openai.serving_chat (OpenAIServingChat)")

    def _record_template_calls(self, tok: Any) -> None:
        """Record each ``apply_chat_template`` call of ``tok`` (the conversation and the keyword
        arguments but ``tokenize``/``return_dict``): the tools the template saw."""
        real = tok.apply_chat_template
        calls = self._calls

        def recording(conversation: Any, *a: Any, **kw: Any) -> Any:
            calls.append((copy.deepcopy(conversation), copy.deepcopy({k: v for k, v in kw.items() if k not in ("tokenize", "return_dict")})))
            return real(conversation, *a, **kw)

        tok.apply_chat_template = recording
        self._tok, self._real_apply = tok, real

    def _setup_online(self, where: str) -> None:
        """A release with ``OnlineRenderer`` (0.33): ``OnlineRenderer.render_chat`` (module docstring)."""
        try:
            online = importlib.import_module("vllm.renderers.online_renderer")
            protocol = importlib.import_module("vllm.entrypoints.openai.chat_completion.protocol")
            from vllm.config import ParallelConfig
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.entrypoints.common.cli_args import make_arg_parser
            from vllm.renderers import renderer_from_config
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError as exc:
            raise AdapterError(f"{where}: cannot drive its render path (OnlineRenderer.render_chat): {exc}") from None
        cls = getattr(online, "OnlineRenderer", None)
        if cls is None or not hasattr(cls, "render_chat"):
            raise AdapterError(f"{where}: cannot drive its render path: no OnlineRenderer.render_chat")
        args = make_arg_parser(FlexibleArgumentParser()).parse_args(
            ["--model", self.model_dir, "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
        )
        engine_args = AsyncEngineArgs.from_cli_args(args)
        model_config = engine_args.create_model_config()
        model_config.quantization = None

        class _Config:  # the VllmConfig fields renderer_from_config reads
            pass

        config = _Config()
        config.model_config = model_config  # type: ignore[attr-defined]
        config.parallel_config = ParallelConfig()  # type: ignore[attr-defined]
        renderer = renderer_from_config(config)
        self._online = cls(
            model_config=model_config, renderer=renderer, request_logger=None, chat_template=None,
            chat_template_content_format=args.chat_template_content_format, enable_auto_tools=True, tool_parser="hermes",
        )
        self._record_template_calls(renderer.tokenizer)
        self._request_cls = protocol.ChatCompletionRequest

    def _setup_serving_chat(self, where: str) -> None:
        """Before ``OnlineRenderer`` (0.11): ``OpenAIServingChat`` as the release's
        ``vllm/entrypoints/openai/api_server.py`` ``init_app_state`` builds it, from its own
        argument parser (``--model MODEL_DIR --enable-auto-tool-choice --tool-call-parser hermes``),
        on a stand-in engine client (module docstring)."""
        try:
            serving_chat = importlib.import_module("vllm.entrypoints.openai.serving_chat")
            protocol = importlib.import_module("vllm.entrypoints.openai.protocol")
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.entrypoints.chat_utils import load_chat_template
            from vllm.entrypoints.openai.cli_args import make_arg_parser
            from vllm.entrypoints.openai.serving_models import BaseModelPath, OpenAIServingModels
            from vllm.transformers_utils.tokenizer import init_tokenizer_from_configs
            from vllm.utils import FlexibleArgumentParser
        except ImportError as exc:
            raise AdapterError(f"{where}: cannot drive its render path (OpenAIServingChat._preprocess_chat): {exc}") from None
        cls = getattr(serving_chat, "OpenAIServingChat", None)
        if cls is None or not hasattr(cls, "_preprocess_chat") or not hasattr(cls, "create_chat_completion"):
            raise AdapterError(f"{where}: cannot drive its render path: no OpenAIServingChat._preprocess_chat")
        _cpu_platform_when_unspecified()
        args = make_arg_parser(FlexibleArgumentParser()).parse_args(
            ["--model", self.model_dir, "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
        )
        model_config = AsyncEngineArgs.from_cli_args(args).create_model_config()
        tokenizer = init_tokenizer_from_configs(model_config=model_config)

        class _EngineClient:  # what create_chat_completion asks the engine before _preprocess_chat returns
            errored = False

            async def get_tokenizer(self, lora_request: Any = None) -> Any:
                return tokenizer

        engine = _EngineClient()
        self._models = OpenAIServingModels(engine_client=engine, model_config=model_config,
                                           base_model_paths=[BaseModelPath(name=self.model_dir, model_path=self.model_dir)])
        self._base_model_path = BaseModelPath
        chat = cls(
            engine, model_config, self._models, args.response_role, request_logger=None,
            chat_template=load_chat_template(args.chat_template), chat_template_content_format=args.chat_template_content_format,
            trust_request_chat_template=args.trust_request_chat_template, return_tokens_as_token_ids=args.return_tokens_as_token_ids,
            enable_auto_tools=args.enable_auto_tool_choice, exclude_tools_when_tool_choice_none=args.exclude_tools_when_tool_choice_none,
            tool_parser=args.tool_call_parser,
        )
        real_pre = chat._preprocess_chat

        async def preprocess_then_stop(*a: Any, **kw: Any) -> Any:
            raise _Preprocessed(await real_pre(*a, **kw))

        chat._preprocess_chat = preprocess_then_stop
        self._chat = chat
        self._loop = asyncio.new_event_loop()  # one loop: the async tokenizer pool is bound to it
        atexit.register(_close_loop, self._loop)
        self._record_template_calls(tokenizer)
        self._request_cls = protocol.ChatCompletionRequest

    def _render_serving_chat(self, req: Any) -> tuple[str, list[int]]:
        """Prompt text and token ids of one validated request through the 0.11 chat endpoint."""
        from replay.render.base import RenderError

        self._models.base_model_paths = [self._base_model_path(name=req.model, model_path=self.model_dir)]
        try:
            got = self._loop.run_until_complete(self._chat.create_chat_completion(req))
        except _Preprocessed as done:
            _, request_prompts, engine_prompts = done.result
            prompt, ids = request_prompts[0], engine_prompts[0].get("prompt_token_ids")
            if not isinstance(prompt, str) or ids is None:
                raise RenderError(f"{self.name}: _preprocess_chat gave no prompt text or token ids ({type(prompt).__name__})") from None
            return prompt, ids
        except Exception as exc:  # noqa: BLE001 - what the endpoint lets through: the server's 500
            raise RenderError(f"rejected by {self.name}: {type(exc).__name__}: {' '.join(str(exc).split())[:500]}") from None
        msg = getattr(getattr(got, "error", None), "message", None) or getattr(got, "message", None) or str(got)
        raise RenderError(f"rejected by {self.name}: {' '.join(str(msg).split())[:500]}")

    def render_request(self, route: str | None, request: dict[str, Any]) -> tuple[str, list[int], list[dict[str, Any]] | None]:
        """``(prompt text, prompt token ids, tools as the template saw them or None)`` of one
        captured Chat Completions body, through the release's render path (module docstring).
        Raises :class:`replay.render.base.RenderError` for what vLLM rejects (its error response, a
        validation error) and for another route."""
        from replay.render.base import RenderError

        self._setup()
        if route not in (None, "chat.completions"):
            raise RenderError(f"{self.name}: a {route} request is not a chat completions request (replay drives vLLM's chat render path only)")
        body = dict(request)
        body.setdefault("model", "model")
        try:
            req = self._request_cls.model_validate(body)
        except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError: the server's 400
            raise RenderError(f"rejected by {self.name} request validation: {' '.join(str(exc).split())[:500]}") from None
        self._calls.clear()
        if self._chat is not None:
            prompt, ids = self._render_serving_chat(req)
        else:
            prompt, ids = self._render_online(req)
        tools = self._calls[-1][1].get("tools") if self._calls else None
        self._last = self._calls[-1] if self._calls else None
        return prompt, [int(i) for i in ids], tools

    def _render_online(self, req: Any) -> tuple[str, list[int]]:
        """Prompt text and token ids of one validated request through ``OnlineRenderer.render_chat``."""
        from replay.render.base import RenderError

        try:
            got = asyncio.run(self._online.render_chat(req))
        except Exception as exc:  # noqa: BLE001 - the template raised: the server's 400
            raise RenderError(f"rejected by {self.name}: {type(exc).__name__}: {' '.join(str(exc).split())[:500]}") from None
        if not isinstance(got, tuple):  # an ErrorResponse
            msg = getattr(getattr(got, "error", None), "message", None) or str(got)
            raise RenderError(f"rejected by {self.name}: {' '.join(str(msg).split())[:500]}")
        _, inputs = got
        first = inputs[0]
        prompt, ids = first.get("prompt"), first.get("prompt_token_ids")
        if prompt is None or ids is None:
            raise RenderError(f"{self.name}: the engine input has no prompt text or token ids (keys: {sorted(first)})")
        return prompt, ids

    def render_tools_variant(self, tools: list[dict[str, Any]] | None) -> str:
        """The last request's prompt text rendered again with ``tools`` in place of the tools vLLM
        handed the template (same conversation and template arguments)."""
        if self._last is None:
            raise RuntimeError("no template call recorded")
        conversation, kwargs = self._last
        return self._real_apply(copy.deepcopy(conversation), tokenize=False, **{**copy.deepcopy(kwargs), "tools": tools})

    def fill_row(self, ex: dict[str, Any], request: dict[str, Any], client_tools: list[Any] | None, row: dict[str, Any], **kw: Any) -> list[int] | None:
        """This exchange's ``renders`` row (:func:`replay.render.framework.framework_row`)."""
        from replay.render.framework import framework_row

        return framework_row(self, ex, request, client_tools, row, **kw)


__all__ = ["VLLMRenderer"]
