"""The request-preparer protocol: what a server does to a request before the chat template.

A *preparer* turns one captured request body into what ``apply_chat_template`` receives: the chat
messages and the tool declarations (OpenAI Chat Completions form, before the tool serializer).
Servers differ here, and a template sees only what their preparation leaves: vLLM parses a tool
call's JSON-string ``function.arguments`` into an object, SGLang rejects arguments that are not a
JSON object, TensorRT-LLM keeps arguments that do not parse as the raw string; each writes an
assistant tool-call turn's ``content: null`` as ``""`` (or ``[]``); each converts Anthropic
Messages requests to chat messages its own way.

``prepare(route, request, content_format)`` returns a :class:`Prepared`; it raises
:class:`PrepareError` where the server would answer HTTP 400 (the message is the server's).
``content_format(template)`` says whether the server would hand the template string contents
(``"string"``) or lists of parts (``"openai"``) for that template text (None: no template).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Prepared", "PrepareError", "Preparer", "openai_tools", "text_of_parts", "py_str"]


class PrepareError(ValueError):
    """The server would reject the request before rendering (its HTTP 400); the message is the
    server's own wording where it has one. Recorded on that side's ``renders`` row."""


@dataclass
class Prepared:
    """What a preparer hands the renderer.

    ``messages``: chat messages (list of dicts) as the template sees them. ``tools``: the tool
    declarations in OpenAI Chat Completions form (``{"type": "function", "function": {...}}``)
    before the tool serializer, or None. ``flat_tools_retry``: when the chat template raises, the
    server renders once more with each tool's ``function`` object alone (SGLang does).
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    flat_tools_retry: bool = False
    notes: list[str] = field(default_factory=list)


class Preparer(Protocol):
    """``name``: the label on ``renders`` rows. ``prepare(route, request, content_format)`` ->
    :class:`Prepared` (raises :class:`PrepareError`); ``content_format(template)`` -> ``"string"``
    or ``"openai"``."""

    name: str

    def prepare(self, route: str | None, request: dict[str, Any], content_format: str = "string") -> Prepared: ...

    def content_format(self, template: str | None) -> str: ...


def openai_tools(route: str | None, tools: Any) -> list[dict[str, Any]] | None:
    """The request's tool declarations in OpenAI Chat Completions form, keys as the client wrote them.

    ``chat.completions``: as sent. ``responses``: a flat function tool ``{"type": "function",
    "name", ...}`` is wrapped into ``{"type": "function", "function": {...}}``. ``messages``
    (Anthropic): ``{name, description, input_schema}`` becomes ``function`` with ``parameters`` =
    ``input_schema`` (what gateways such as LiteLLM do to serve them on an OpenAI-style server).
    Keys the client wrote are kept, nothing is added. Returns None when there are no tools.
    This is also the form leaked nulls are judged against (a null a converter adds is a leak).
    """
    if not isinstance(tools, list) or not tools:
        return None
    out = []
    for t in tools:
        if route == "messages" and isinstance(t, dict) and "function" not in t and "name" in t:
            fn = {k: v for k, v in t.items() if k not in ("input_schema", "type")}
            if "input_schema" in t:
                fn["parameters"] = t["input_schema"]
            out.append({"type": "function", "function": fn})
        elif route == "responses" and isinstance(t, dict) and t.get("type") == "function" and "function" not in t:
            out.append({"type": "function", "function": {k: v for k, v in t.items() if k != "type"}})
        else:
            out.append(t)
    return out


def text_of_parts(content: Any, sep: str) -> str:
    """The text parts of a content list (``{"type": "text"|"input_text"|"output_text", "text"}``
    or bare strings) joined by ``sep``; a string is returned as is, None as ``""``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for p in content if isinstance(content, list) else ():
        if isinstance(p, str):
            texts.append(p)
        elif isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text") and isinstance(p.get("text"), str):
            texts.append(p["text"])
    return sep.join(texts)


def py_str(value: Any) -> str:
    """``str(value)`` as Python prints a JSON value (``[{'type': 'text', ...}]``): what a server's
    ``str(block.content)`` writes for a content list."""
    return str(value)


_SCALARS = (str, int, float, bool, type(None))


def deep(value: Any) -> Any:
    """A deep copy (preparers never modify the captured request). Exact ``dict``/``list`` are
    copied by a walk of their own (about twice as fast as :func:`copy.deepcopy` on decoded JSON,
    whose values are never shared or cyclic); immutable JSON scalars are kept, as ``deepcopy``
    keeps them; any other value is ``copy.deepcopy``-ed."""
    t = type(value)
    if t is dict:
        return {k: v if type(v) in _SCALARS else deep(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _SCALARS else deep(v) for v in value]
    if t in _SCALARS:
        return value
    return copy.deepcopy(value)


def dumps(value: Any) -> str:
    """``json.dumps`` with Python's default separators (what ``json.dumps(block.input)`` writes)."""
    return json.dumps(value)
