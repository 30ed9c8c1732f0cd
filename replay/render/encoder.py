"""A checkpoint's own Python encoder as a renderer: ``path/to/encoding.py:function`` or ``module:function``.

Some checkpoints ship their prompt encoder as Python instead of (or beside) a chat template:
DeepSeek V3.2 (``encoding/encoding_dsv32.py``) and V4 ship ``encode_messages(messages,
thinking_mode, context=None, drop_thinking=True, add_default_bos_token=True) -> str``, which takes
OpenAI-style message dicts and reads the tool declarations (OpenAI form, ``{"type": "function",
"function": {...}}``) from a ``tools`` key of the system message. Servers call it with the
request's tools attached that way.

:class:`EncoderRenderer` calls such a function with the messages and the serialized tools as
dicts, choosing by the function's signature:

- it has a ``tools`` parameter: ``fn(messages, tools=tools)``;
- otherwise the DeepSeek convention: the tools are set as ``tools`` of the first ``system``
  message (a ``{"role": "system", "content": ""}`` is put first when there is none); the caller's
  messages are never modified (copied first).

A ``thinking_mode`` parameter without default gets ``"chat"``; ``extra`` keyword arguments are
passed as given. The function returns the prompt text (``str``), token ids (a list of ints,
then ``text`` is rendered by ``decode``, when the function's module has a ``decode`` function), or
``(text, ids)``.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Callable

from replay.plugins import load_object
from replay.render.base import RenderError


class EncoderRenderer:
    """Render with a checkpoint's encoding function (see the module docstring).

    ``spec``: ``path/to/encoding.py:function`` or ``module:function`` (loaded with
    :func:`replay.plugins.load_object`); or pass ``fn`` directly. ``extra``: keyword arguments for
    every call. ``render(messages, tools)`` returns the prompt text; ``render_ids`` returns
    ``(text, ids or None)``. Any exception of the function is raised as :class:`RenderError`.
    The constructor raises :class:`replay.plugins.PluginError` (a ValueError) when the spec
    cannot be loaded, ValueError when the object is not callable.
    """

    def __init__(self, spec: str | None = None, fn: Callable[..., Any] | None = None, extra: dict[str, Any] | None = None) -> None:
        if fn is None:
            if spec is None:
                raise ValueError("EncoderRenderer needs a spec or a function")
            fn = load_object(spec)
        if not callable(fn):
            raise ValueError(f"{spec!r}: {type(fn).__name__} object is not callable")
        self.fn = fn
        self.name = f"encoder:{spec or getattr(fn, '__qualname__', 'function')}"
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}
        self.takes_tools = "tools" in params
        self.kwargs = dict(extra or {})
        tm = params.get("thinking_mode")
        if tm is not None and tm.default is inspect.Parameter.empty and "thinking_mode" not in self.kwargs:
            self.kwargs["thinking_mode"] = "chat"
        module = inspect.getmodule(fn)
        self.decode = getattr(module, "decode", None) if module is not None else None

    def _call(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
        msgs = copy.deepcopy(messages)
        if self.takes_tools:
            return self.fn(msgs, tools=copy.deepcopy(tools) if tools else None, **self.kwargs)
        if tools:
            if not (msgs and msgs[0].get("role") == "system"):
                msgs.insert(0, {"role": "system", "content": ""})
            msgs[0]["tools"] = copy.deepcopy(tools)
        return self.fn(msgs, **self.kwargs)

    def render_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> tuple[str, list[int] | None]:
        """``(prompt text, token ids or None)``; raises :class:`RenderError`."""
        try:
            out = self._call(messages, tools)
        except Exception as exc:
            raise RenderError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        if isinstance(out, str):
            return out, None
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], str):
            return out[0], [int(i) for i in out[1]] if out[1] is not None else None
        if isinstance(out, list) and all(isinstance(i, int) for i in out):
            if self.decode is None:
                raise RenderError(f"{self.name}: returned token ids and its module has no decode() for the text")
            return str(self.decode(out)), list(out)
        raise RenderError(f"{self.name}: returned {type(out).__name__}, expected str, ids or (str, ids)")

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        """The prompt text; raises :class:`RenderError`."""
        return self.render_ids(messages, tools)[0]
