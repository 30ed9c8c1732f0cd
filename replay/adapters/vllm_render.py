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

Releases before the ``OnlineRenderer`` (0.11 and older: ``parse_chat_messages`` with
``apply_hf_chat_template`` in ``serving_chat.py``) are not driven: a one-line
:class:`replay.adapters.AdapterError` names the release and what is missing. Anthropic Messages
and Responses requests get a render error naming the route.
"""

from __future__ import annotations

import asyncio
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
        self._online: Any = None
        self._calls: list[tuple[Any, dict[str, Any]]] = []

    def _setup(self) -> None:
        if self._online is not None:
            return
        if not (Path(self.model_dir) / "config.json").is_file():
            raise AdapterError(f"renderer vllm:{self.model_dir}: no config.json there (the model folder needs config.json and the tokenizer files)")
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        self.release = _release()
        self.name = f"vllm-{self.release}"
        where = f"vLLM {self.release} ({sys.executable})"
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
        tok = renderer.tokenizer
        real = tok.apply_chat_template
        calls = self._calls

        def recording(conversation: Any, *a: Any, **kw: Any) -> Any:
            calls.append((copy.deepcopy(conversation), copy.deepcopy({k: v for k, v in kw.items() if k not in ("tokenize", "return_dict")})))
            return real(conversation, *a, **kw)

        tok.apply_chat_template = recording
        self._tok, self._real_apply = tok, real
        self._request_cls = protocol.ChatCompletionRequest

    def render_request(self, route: str | None, request: dict[str, Any]) -> tuple[str, list[int], list[dict[str, Any]] | None]:
        """``(prompt text, prompt token ids, tools as the template saw them or None)`` of one
        captured Chat Completions body, through vLLM's render path. Raises
        :class:`replay.render.base.RenderError` for what vLLM rejects (its error response, a
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
        tools = self._calls[-1][1].get("tools") if self._calls else None
        self._last = self._calls[-1] if self._calls else None
        return prompt, [int(i) for i in ids], tools

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


def vllm_renderer(spec: str) -> VLLMRenderer:
    """The renderer of ``vllm:MODEL_DIR``, set up at once where vllm is installed (the side's
    worker), lazily elsewhere. Raises ValueError without a model folder,
    :class:`replay.adapters.AdapterError` for a release it cannot drive."""
    import importlib.util

    model_dir = spec.partition(":")[2].strip()
    if not model_dir:
        raise ValueError(f"renderer {spec!r}: give the model folder (config.json, tokenizer files, chat template): vllm:MODEL_DIR")
    renderer = VLLMRenderer(model_dir)
    if importlib.util.find_spec("vllm") is not None:
        renderer._setup()
    return renderer


__all__ = ["VLLMRenderer", "vllm_renderer"]
