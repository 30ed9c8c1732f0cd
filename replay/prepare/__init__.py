"""Request preparers: what a server does to a request before the chat template (``--*-preparer``).

A side's preparer turns the captured request body into the chat messages and tool declarations
``apply_chat_template`` receives. Built-ins, one module per server (each docstring cites the
upstream functions it mirrors):

==========  ===================================================================================
``vllm``    (default, every side) vLLM's ``parse_chat_messages``: ``content: null`` -> ``""``,
            string ``arguments`` parsed to objects, Anthropic / Responses converted its way
``sglang``  SGLang's ``_apply_jinja_template``: arguments must parse to an object (else HTTP 400)
``trtllm``  TensorRT-LLM's ``parse_chat_message_content``: unparseable arguments kept as text
``as-sent`` the client's JSON untouched (``content: null`` and string arguments reach the template)
==========  ===================================================================================

vLLM is the default because it is the most widely deployed of the three open servers, and its
preparation lets the Qwen3, Qwen3-Coder, GLM and gpt-oss templates render OpenAI-SDK traffic.

A plugin is ``module:attr`` or ``path/to/file.py:attr``: a class with the :class:`Preparer`
protocol (instantiated without arguments), or a function ``fn(route, request) -> messages`` or
``-> (messages, tools)`` (tools in Chat Completions form; None keeps :func:`openai_tools`).
"""

from __future__ import annotations

from replay.errors import UnknownNameError

import inspect
from typing import Any, Callable

from replay.resolve import resolve_spec
from replay.prepare.as_sent import AsSentPreparer
from replay.prepare.base import Prepared, PrepareError, Preparer, openai_tools
from replay.prepare.sglang import SglangPreparer
from replay.prepare.trtllm import TrtllmPreparer
from replay.prepare.vllm import VllmPreparer

__all__ = ["PREPARERS", "DEFAULT_PREPARER", "Prepared", "PrepareError", "Preparer", "UnknownPreparerError", "get_preparer", "openai_tools"]

#: Built-in preparers by name.
PREPARERS: dict[str, Callable[[], Any]] = {
    "vllm": VllmPreparer,
    "sglang": SglangPreparer,
    "trtllm": TrtllmPreparer,
    "as-sent": AsSentPreparer,
}
#: The preparer of every side unless ``--*-preparer`` says otherwise.
DEFAULT_PREPARER = "vllm"


class UnknownPreparerError(ValueError):
    """A preparer spec that is neither a built-in name nor a loadable plugin; the message lists the built-ins."""


class FunctionPreparer:
    """A plugin function ``fn(route, request)`` as a preparer: it returns the messages, or
    ``(messages, tools)``; anything else fails that request's render (``TypeError``)."""

    def __init__(self, spec: str, fn: Callable[..., Any]) -> None:
        self.name = f"plugin:{spec}"
        self.fn = fn

    def content_format(self, template: str | None) -> str:
        """Always ``"string"``: a plugin function takes no content format."""
        return "string"

    def prepare(self, route: str | None, request: dict[str, Any], content_format: str = "string") -> Prepared:
        """Call the plugin; raises ``TypeError`` when it returns anything but messages or
        ``(messages, tools)``."""
        got = self.fn(route, request)
        tools: Any = None
        if isinstance(got, tuple) and len(got) == 2:
            got, tools = got
        if not isinstance(got, list) or not all(isinstance(m, dict) for m in got):
            raise TypeError(f"preparer {self.name} returned {type(got).__name__}, expected a list of message dicts or (messages, tools)")
        return Prepared(got, tools if tools is not None else openai_tools(route, request.get("tools")))


def get_preparer(spec: str | None) -> Any:
    """The preparer ``spec`` names (None: :data:`DEFAULT_PREPARER`).

    Raises :class:`UnknownPreparerError` for an unknown name or a plugin object that is neither
    a class with ``prepare`` nor a function, :class:`replay.plugins.PluginError` when a plugin
    cannot be loaded."""
    return resolve_spec(
        spec or DEFAULT_PREPARER,
        builtin=lambda s: PREPARERS[s]() if s in PREPARERS else None,
        plugin=_plugin_preparer,
        unknown=lambda s: _UnknownPreparerName(
            f"unknown preparer {s!r}: built-ins are {', '.join(PREPARERS)}; or give a plugin as 'module:attr' or 'path/to/file.py:attr'"
        ),
    )


def _plugin_preparer(spec: str, obj: Any) -> Any:
    """A loaded plugin object as a preparer: a class with ``prepare`` (instantiated), or a function
    ``fn(route, request)`` (:class:`FunctionPreparer`)."""
    if inspect.isclass(obj) and hasattr(obj, "prepare"):
        inst = obj()
        if not hasattr(inst, "content_format"):
            inst.content_format = lambda template: "string"  # type: ignore[attr-defined]
        if not hasattr(inst, "name"):
            inst.name = f"plugin:{spec}"  # type: ignore[attr-defined]
        return inst
    if callable(obj):
        return FunctionPreparer(spec, obj)
    raise UnknownPreparerError(f"{spec!r}: {type(obj).__name__} object is neither a preparer class nor a function")


class _UnknownPreparerName(UnknownPreparerError, UnknownNameError):
    """A preparer spec naming no built-in and shaped as no plugin (a usage error)."""
