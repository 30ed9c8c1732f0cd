"""``as-sent``: the request's messages and tools as the client wrote them (no server preparation).

Chat Completions: ``messages`` as sent (``content: null`` stays null, JSON-string ``arguments``
stay strings). Anthropic Messages: a top-level ``system`` (string, or text blocks joined) becomes
a first system message, then ``messages`` as sent (content blocks untouched). Responses:
``instructions`` as a system message, then ``input`` (a string is one user message; items kept as
they are). Tools: :func:`replay.prepare.base.openai_tools`. What a gateway that forwards the
client's JSON to ``apply_chat_template`` untouched renders; most agent traffic does not render
through tool-call templates this way (``content: null``, string arguments).
"""

from __future__ import annotations

from typing import Any

from replay.prepare.base import Prepared, PrepareError, deep, openai_tools


class AsSentPreparer:
    """The ``as-sent`` preparer (module docstring). ``prepare`` raises :class:`PrepareError` when
    the request holds no message list."""

    name = "as-sent"

    def content_format(self, template: str | None) -> str:
        """Always ``"string"``: contents are passed as the client wrote them."""
        return "string"

    def prepare(self, route: str | None, request: dict[str, Any], content_format: str = "string") -> Prepared:
        msgs: list[dict[str, Any]] = []
        if route == "messages" and request.get("system") is not None:
            system = request["system"]
            if isinstance(system, list):
                system = "".join(b.get("text", "") for b in system if isinstance(b, dict))
            msgs.append({"role": "system", "content": system})
        if route == "responses":
            if isinstance(request.get("instructions"), str):
                msgs.append({"role": "system", "content": request["instructions"]})
            inp = request.get("input")
            if isinstance(inp, str):
                return Prepared(msgs + [{"role": "user", "content": inp}], openai_tools(route, request.get("tools")))
            body = inp
        else:
            body = request.get("messages")
        if not isinstance(body, list):
            raise PrepareError("request has no message list to render")
        return Prepared(msgs + [deep(m) for m in body if isinstance(m, dict)], openai_tools(route, request.get("tools")))
