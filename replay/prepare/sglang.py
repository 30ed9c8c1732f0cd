"""``sglang``: a request prepared for the chat template as SGLang's OpenAI-compatible server prepares it.

Mirrors SGLang main as stored here (``python/sglang/srt/entrypoints/openai/serving_chat.py``
``OpenAIServingChat._apply_jinja_template`` at 002897c2; ``python/sglang/srt/parser/jinja_template_utils.py``
``process_content_for_template_format``; ``python/sglang/srt/entrypoints/anthropic/request_conversion.py``
``convert_anthropic_to_openai_request``), facts only:

- every message's tool calls go through ``normalize_assistant_tool_call_arguments``: a string
  ``function.arguments`` is ``orjson.loads``-ed, and the request is rejected (HTTP 400) with
  "Assistant tool call function.arguments must be valid JSON." when it does not parse, or "... must
  be a JSON object." when it is not an object (arrays, numbers, strings);
- ``content: null`` becomes ``""``; then by the template's content format
  (:func:`replay.prepare.content_format.sglang_content_format`): ``"string"`` joins a list
  content's text parts with ``" "`` (a space, where vLLM uses a newline), ``"openai"`` keeps
  text parts and writes images as ``{"type": "image"}``; keys whose value is null are dropped;
- ``normalize_tool_content``: a tool message whose content is a list of text parts is joined with ``" "``;
- tools reach the template as the request model dumps them (the serializer), and when the first
  ``apply_chat_template`` raises, SGLang renders once more with each tool's ``function`` object
  alone ("Some templates (e.g. Mistral) expect tools without the OpenAI wrapper"):
  :attr:`Prepared.flat_tools_retry`;
- Anthropic Messages: ``system`` (a non-blank string, or text blocks) joined by ``"\\n"`` is one
  system message; ``thinking`` blocks are not rendered as text here (upstream re-wraps them with the
  reasoning parser's own tokens, a model-specific step not reproduced); text blocks (an empty one
  too) are text parts; ``tool_use`` -> a tool call with ``arguments = json.dumps(input)`` (no id:
  ``call_0`` here, a random id upstream); a user's ``tool_result`` -> a ``tool`` message with
  ``tool_call_id = tool_use_id or id``, its text blocks as the content (one text part as a
  string), pending user text emitted before it; an assistant turn left empty gets ``content: ""``.
  Tools: ``{"name", "description": description or "", "parameters": input_schema}``; server tools
  (a ``type`` other than ``custom`` without ``input_schema``) are skipped.
- Responses requests: converted as vLLM converts them (:func:`replay.prepare.vllm.responses_messages`);
  SGLang's own Responses path is not mirrored.

Not reproduced: the extra null-valued fields of SGLang's pydantic message models (they are
dropped again before rendering, so they do not reach the template).
"""

from __future__ import annotations

import json
from typing import Any

from replay.prepare.base import Prepared, PrepareError, deep, dumps, openai_tools
from replay.prepare.content_format import sglang_content_format
from replay.prepare.vllm import responses_messages


def normalize_arguments(message: dict[str, Any]) -> None:
    """SGLang's ``normalize_assistant_tool_call_arguments``, in place; raises :class:`PrepareError`."""
    if message.get("role") != "assistant" or not isinstance(message.get("tool_calls"), list):
        return
    for item in message["tool_calls"]:
        fn = item.get("function") if isinstance(item, dict) else None
        if not isinstance(fn, dict):
            continue
        if isinstance(fn.get("arguments"), str):
            try:
                parsed = json.loads(fn["arguments"])
            except ValueError:
                raise PrepareError("Assistant tool call function.arguments must be valid JSON.") from None
            if not isinstance(parsed, dict):
                raise PrepareError("Assistant tool call function.arguments must be a JSON object.")
            fn["arguments"] = parsed


def _process(msg: dict[str, Any], content_format: str) -> dict[str, Any]:
    """``process_content_for_template_format`` then ``normalize_tool_content``."""
    content = msg.get("content")
    if not isinstance(content, list):
        out = {k: v for k, v in msg.items() if v is not None}
    elif content_format == "openai":
        parts: list[dict[str, Any]] = []
        for chunk in content:
            if not isinstance(chunk, dict):
                continue
            kind = chunk.get("type")
            if kind in ("image_url", "input_image"):
                parts.append({"type": "image"})
            elif kind == "video_url":
                parts.append({"type": "video"})
            elif kind == "audio_url":
                parts.append({"type": "audio"})
            elif kind in ("text", "input_text"):
                parts.append({"type": "text", "text": chunk.get("text")})
            elif kind == "tool_reference":
                parts.append(chunk)
        out = {k: v for k, v in msg.items() if v is not None and k != "content"}
        out["content"] = parts
    else:
        texts = [c["text"] for c in content if isinstance(c, dict) and c.get("type") in ("text", "input_text") and "text" in c]
        out = dict(msg)
        out["content"] = " ".join(texts) if texts else ""
        out = {k: v for k, v in out.items() if v is not None}
    c = out.get("content")
    if out.get("role") == "tool" and isinstance(c, list) and all((isinstance(p, dict) and p.get("type") == "text") or isinstance(p, str) for p in c):
        out["content"] = " ".join(p.get("text", "") if isinstance(p, dict) else p for p in c)
    return out


def chat_messages(messages: Any, content_format: str) -> list[dict[str, Any]]:
    """SGLang's preparation of a Chat Completions ``messages`` list (module docstring)."""
    if not isinstance(messages, list):
        raise PrepareError("request has no message list to render")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise PrepareError(f"messages[{i}]: a message must be an object with a role")
        msg = deep(m)
        normalize_arguments(msg)
        if msg.get("content") is None:
            msg["content"] = ""
        out.append(_process(msg, content_format))
    return out


def _is_server_tool(tool: dict[str, Any]) -> bool:
    return tool.get("type") not in (None, "custom") and "input_schema" not in tool


def anthropic_messages(request: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """SGLang's ``convert_anthropic_to_openai_request``: ``(chat messages, tools)`` (module docstring)."""
    out: list[dict[str, Any]] = []
    system_parts: list[str] = []
    system = request.get("system")
    if isinstance(system, str):
        if system.strip():
            system_parts.append(system)
    elif isinstance(system, list):
        system_parts.extend(b["text"] for b in system if isinstance(b, dict) and b.get("type") == "text" and b.get("text"))
    if system_parts:
        out.append({"role": "system", "content": "\n".join(system_parts)})
    msgs = request.get("messages")
    if not isinstance(msgs, list):
        raise PrepareError("request has no message list to render")

    def emit_user(parts: list[dict[str, Any]]) -> None:
        if parts:
            out.append({"role": "user", "content": parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else list(parts)})
            parts.clear()

    for m in msgs:
        if not isinstance(m, dict):
            raise PrepareError("messages[]: a message must be an object")
        role, content = m.get("role"), m.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        msg: dict[str, Any] = {"role": role}
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind in ("thinking", "redacted_thinking"):
                continue
            if kind == "text" and block.get("text") is not None:
                parts.append({"type": "text", "text": block["text"]})
            elif kind == "tool_use":
                calls.append({"id": block.get("id") or "call_0", "type": "function",
                              "function": {"name": block.get("name") or "", "arguments": dumps(block.get("input") or {})}})
            elif kind == "tool_result":
                body = block.get("content")
                if isinstance(body, list):
                    texts = [b["text"] for b in body if isinstance(b, dict) and b.get("type") == "text" and b.get("text")]
                    contents: list[Any] = [t for t in texts] or [""]
                    text = "\n".join(texts)
                else:
                    text = str(body) if body else ""
                    contents = [text]
                call_id = block.get("tool_use_id") or block.get("id") or ""
                if role == "user":
                    emit_user(parts)
                    out.extend({"role": "tool", "tool_call_id": call_id, "content": c} for c in contents)
                else:
                    parts.append({"type": "text", "text": f"Tool result: {text}"})
        if calls:
            msg["tool_calls"] = calls
        if parts:
            msg["content"] = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
            out.append(msg)
        elif calls:
            out.append(msg)
        elif role == "user":
            continue
        else:
            msg["content"] = ""
            out.append(msg)
    tools = None
    if isinstance(request.get("tools"), list):
        tools = [
            {"type": "function", "function": {"name": t.get("name"), "description": t.get("description") or "", "parameters": t.get("input_schema")}}
            for t in request["tools"] if isinstance(t, dict) and not _is_server_tool(t)
        ] or None
    return out, tools


class SglangPreparer:
    """The ``sglang`` preparer (module docstring); ``prepare`` raises :class:`PrepareError` with
    SGLang's HTTP 400 messages."""

    name = "sglang"

    def content_format(self, template: str | None) -> str:
        """SGLang's detected content format for ``template``."""
        return sglang_content_format(template)

    def prepare(self, route: str | None, request: dict[str, Any], content_format: str = "string") -> Prepared:
        if route == "messages":
            msgs, tools = anthropic_messages(request)
        elif route == "responses":
            msgs, tools = responses_messages(request), openai_tools(route, request.get("tools"))
        else:
            msgs, tools = request.get("messages"), openai_tools(route, request.get("tools"))
        return Prepared(chat_messages(msgs, content_format), tools, flat_tools_retry=True)
