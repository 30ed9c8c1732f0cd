"""``trtllm``: a request prepared for the chat template as TensorRT-LLM's OpenAI server prepares it.

Mirrors TensorRT-LLM main as stored here (``tensorrt_llm/serve/chat_utils.py`` at 0c351902:
``parse_chat_message_content``, ``_parse_assistant_message_content``,
``_normalize_tool_call_arguments``, ``_parse_tool_message_content``), facts only:

- every content goes through ``parse_chat_message_content_parts``: ``null`` -> no parts, a string
  -> one text part, and the message's ``content`` is the text parts joined by ``"\\n"`` (always a
  string; ``null`` -> ``""``), with a ``media`` list (empty for text) beside it;
- an assistant message keeps ``reasoning_content`` (from ``reasoning``, else ``reasoning_content``)
  and ``tool_calls``, each call's ``function.arguments``: null -> ``{}``; a string is
  ``json.loads``-ed, kept as the raw string when it does not parse, and rejected (HTTP 400,
  "tool_calls[i].function.arguments must be a JSON object.") when it parses to a non-object;
  an object is kept; any other type is rejected;
- a tool message keeps ``tool_call_id``; a system message keeps its ``tools``; every other key
  (``name`` included) is dropped;
- TensorRT-LLM's tools reach the template as the request model dumps them (the serializer).

Anthropic Messages and Responses requests are converted as vLLM converts them
(:mod:`replay.prepare.vllm`); TensorRT-LLM's own converters, where it has them, are not mirrored.
TensorRT-LLM itself is not installable here (docs: real-engines.md), so this module is tested
against the upstream rules above, not against the package.
"""

from __future__ import annotations

import json
from typing import Any

from replay.prepare.base import Prepared, PrepareError, deep, openai_tools, text_of_parts
from replay.prepare.vllm import anthropic_messages, responses_messages


def _arguments(index: int, item: Any) -> dict[str, Any]:
    if not isinstance(item, dict) or not isinstance(item.get("function"), dict):
        raise PrepareError(f"tool_calls[{index}].function must be an object.")
    item = dict(item)
    item["function"] = dict(item["function"])
    args = item["function"].get("arguments")
    if args is None:
        item["function"]["arguments"] = {}
    elif isinstance(args, str):
        try:
            parsed = json.loads(args)
        except json.JSONDecodeError:
            return item
        if not isinstance(parsed, dict):
            raise PrepareError(f"tool_calls[{index}].function.arguments must be a JSON object.")
        item["function"]["arguments"] = parsed
    elif not isinstance(args, dict):
        raise PrepareError(f"tool_calls[{index}].function.arguments must be an object.")
    return item


def chat_messages(messages: Any) -> list[dict[str, Any]]:
    """TensorRT-LLM's ``parse_chat_message_content`` over a ``messages`` list (module docstring)."""
    if not isinstance(messages, list):
        raise PrepareError("request has no message list to render")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise PrepareError(f"messages[{i}]: a message must be an object with a role")
        role = m["role"]
        content = m.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise PrepareError(f"messages[{i}].content must be a string, a list of parts or null")
        msg: dict[str, Any] = {"role": role, "content": text_of_parts(content, "\n"), "media": []}
        if role == "assistant":
            reasoning = m.get("reasoning")
            if reasoning is None:
                reasoning = m.get("reasoning_content")
            if reasoning is not None:
                msg["reasoning_content"] = reasoning
            calls = m.get("tool_calls")
            if calls is not None:
                msg["tool_calls"] = [_arguments(k, deep(c)) for k, c in enumerate(calls)]
        elif role == "tool":
            if "tool_call_id" in m:
                msg["tool_call_id"] = m["tool_call_id"]
        elif role == "system" and m.get("tools") is not None:
            msg["tools"] = deep(m["tools"])
        out.append(msg)
    return out


class TrtllmPreparer:
    """The ``trtllm`` preparer (module docstring)."""

    name = "trtllm"

    def content_format(self, template: str | None) -> str:
        """``"string"``: TensorRT-LLM gives text-only messages string contents."""
        return "string"

    def prepare(self, route: str | None, request: dict[str, Any], content_format: str = "string") -> Prepared:
        if route == "messages":
            msgs, tools = anthropic_messages(request)
        elif route == "responses":
            msgs, tools = responses_messages(request), openai_tools(route, request.get("tools"))
        else:
            msgs, tools = request.get("messages"), openai_tools(route, request.get("tools"))
        return Prepared(chat_messages(msgs), tools)
