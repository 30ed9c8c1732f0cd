"""``vllm``: a request prepared for the chat template as vLLM's OpenAI-compatible server prepares it.

Mirrors vLLM main as stored here (``vllm/entrypoints/chat_utils.py`` at commit 001eadcf,
the 0.1x/0.2x line; ``vllm/entrypoints/anthropic/serving_messages.py`` at 0561ec49;
``vllm/entrypoints/openai/responses/utils.py``), facts only:

- ``parse_chat_messages`` -> ``_parse_chat_message_content`` per message: ``content: null`` becomes
  an empty part list, a string one text part; then with the template's content format
  (:func:`replay.prepare.content_format.vllm_content_format`) ``"string"`` joins the text parts
  with ``"\\n"`` (so ``null`` -> ``""``) and ``"openai"`` keeps ``[{"type": "text", "text": ...}]``
  (``null`` -> ``[]``). Only ``role``, ``content``, an assistant's ``tool_calls`` (when not null)
  and ``reasoning`` (copied to ``reasoning_content``), a tool message's ``tool_call_id`` (its
  list content flattened to text joined by ``"\\n"``), a string ``name``, and a developer
  message's ``tools`` reach the template; other keys are dropped.
- ``_postprocess_messages``: an assistant's empty ``tool_calls`` list is removed; each call's
  string ``function.arguments`` is ``json.loads``-ed, and ``{}`` when it is not JSON (empty,
  malformed); null or another type becomes ``{}``.
- Anthropic Messages (``_convert_anthropic_to_openai_request``): ``system`` (string or text blocks
  concatenated) is a system message; text blocks (non-empty) are text parts, one text part is a
  plain string; ``tool_use`` -> a tool call with ``arguments = json.dumps(input)``; a user's
  ``tool_result`` -> a ``tool`` message whose ``tool_call_id`` is the block's ``id`` (the converter
  reads ``id``, not ``tool_use_id``, so it is ``""`` for a block as the Anthropic SDK sends it) and
  whose content is ``str(content)`` (a block list is printed as a Python list); a message left with
  neither parts nor calls gets ``content: ""``. Tools: ``{"name", "description", "parameters":
  input_schema}`` (a missing description is ``None``, a null the client never sent). A
  ``tool_use`` without id gets ``call_<time>`` upstream; here ``call_0`` (so two runs render alike).
- Responses (``construct_input_messages``): ``instructions`` -> system, a string ``input`` -> one
  user message; ``function_call`` items -> an assistant tool call (merged into the previous
  assistant message), ``function_call_output`` -> a ``tool`` message, a ``reasoning`` item ->
  assistant ``reasoning``, an assistant ``message`` item -> its first part's text, other items with
  a ``role`` as they are. Flat function tools are wrapped into Chat Completions form.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from replay.prepare.base import Prepared, PrepareError, deep, dumps, openai_tools, py_str, text_of_parts
from replay.prepare.content_format import vllm_content_format

_TEXT = ("text", "input_text", "output_text", "refusal")


def _parts(content: Any) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    raise PrepareError(f"message content must be a string, a list of parts or null, got {type(content).__name__}")


def _content(parts: list[Any], content_format: str) -> Any:
    texts: list[str] = []
    wrapped: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, str):
            texts.append(p)
            wrapped.append({"type": "text", "text": p})
        elif isinstance(p, dict):
            kind = p.get("type")
            if kind in _TEXT or kind == "thinking":
                text = p.get("thinking" if kind == "thinking" else ("refusal" if kind == "refusal" else "text"))
                if text is None:
                    continue
                texts.append(text)
                wrapped.append({"type": "text", "text": text})
            elif kind in ("image_url", "input_image", "image"):
                wrapped.append({"type": "image"})
            elif kind in ("input_audio", "audio_url"):
                wrapped.append({"type": "audio"})
            elif kind == "video_url":
                wrapped.append({"type": "video"})
            else:
                raise PrepareError(f"Unsupported chat content part type: {kind!r}")
    return wrapped if content_format == "openai" else "\n".join(texts)


def chat_messages(messages: Any, content_format: str) -> list[dict[str, Any]]:
    """vLLM's ``parse_chat_messages`` over a Chat Completions ``messages`` list (module
    docstring). Raises :class:`PrepareError` for a message that is not an object or has no role."""
    if not isinstance(messages, list):
        raise PrepareError("request has no message list to render")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise PrepareError(f"messages[{i}]: a message must be an object with a role")
        role = m["role"]
        msg: dict[str, Any] = {"role": role, "content": _content(_parts(m.get("content")), content_format)}
        if role == "assistant":
            if m.get("tool_calls") is not None:
                msg["tool_calls"] = deep(list(m["tool_calls"]))
            if m.get("reasoning") is not None:
                msg["reasoning"] = m["reasoning"]
                msg["reasoning_content"] = m["reasoning"]
        elif role == "tool":
            if "tool_call_id" in m:
                msg["tool_call_id"] = m["tool_call_id"]
            if isinstance(msg["content"], list):
                if any(isinstance(p, dict) and p.get("type") != "text" for p in msg["content"]):
                    pass
                else:
                    msg["content"] = "\n".join(p.get("text", "") for p in msg["content"] if isinstance(p, dict))
        if isinstance(m.get("name"), str):
            msg["name"] = m["name"]
        if role == "developer":
            msg["tools"] = deep(m.get("tools"))
        out.append(msg)
    postprocess(out)
    return out


def postprocess(messages: list[dict[str, Any]]) -> None:
    """vLLM's ``_postprocess_messages``, in place (module docstring)."""
    for message in messages:
        if message.get("role") != "assistant" or "tool_calls" not in message:
            continue
        calls = message["tool_calls"]
        if not isinstance(calls, list):
            continue
        if not calls:
            message.pop("tool_calls")
            continue
        for item in calls:
            fn = item.get("function") if isinstance(item, dict) else None
            if not isinstance(fn, dict):
                raise PrepareError("tool_calls[].function must be an object")
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    fn["arguments"] = json.loads(args)
                except json.JSONDecodeError:
                    fn["arguments"] = {}
            elif not isinstance(args, (dict, list)):
                fn["arguments"] = {}


def anthropic_messages(request: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """vLLM's ``_convert_anthropic_to_openai_request``: ``(chat messages, tools)`` (module docstring)."""
    out: list[dict[str, Any]] = []
    system = request.get("system")
    if system:
        if isinstance(system, str):
            out.append({"role": "system", "content": system})
        elif isinstance(system, list):
            out.append({"role": "system", "content": "".join(b.get("text") or "" for b in system if isinstance(b, dict) and b.get("type") == "text")})
    msgs = request.get("messages")
    if not isinstance(msgs, list):
        raise PrepareError("request has no message list to render")
    for m in msgs:
        if not isinstance(m, dict):
            raise PrepareError("messages[]: a message must be an object")
        msg: dict[str, Any] = {"role": m.get("role")}
        content = m.get("content")
        if isinstance(content, str):
            msg["content"] = content
        else:
            parts: list[dict[str, Any]] = []
            calls: list[dict[str, Any]] = []
            for block in content if isinstance(content, list) else ():
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "text" and block.get("text"):
                    parts.append({"type": "text", "text": block["text"]})
                elif kind == "image" and block.get("source"):
                    src = block["source"]
                    parts.append({"type": "image_url", "image_url": {"url": src.get("data", "") if isinstance(src, dict) else ""}})
                elif kind == "tool_use":
                    calls.append({"id": block.get("id") or "call_0", "type": "function",
                                  "function": {"name": block.get("name") or "", "arguments": dumps(block.get("input") or {})}})
                elif kind == "tool_result":
                    body = block.get("content")
                    text = py_str(body) if body else ""
                    if m.get("role") == "user":
                        out.append({"role": "tool", "tool_call_id": block.get("id") or "", "content": text})
                    else:
                        parts.append({"type": "text", "text": f"Tool result: {text}"})
            if calls:
                msg["tool_calls"] = calls
            if parts:
                msg["content"] = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
            elif not calls:
                msg["content"] = ""
        out.append(msg)
    tools = None
    if isinstance(request.get("tools"), list):
        tools = [
            {"type": "function", "function": {"name": t.get("name"), "description": t.get("description"), "parameters": t.get("input_schema")}}
            for t in request["tools"] if isinstance(t, dict)
        ]
    return out, tools


def responses_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    """vLLM's ``construct_input_messages`` for one Responses request (module docstring)."""
    out: list[dict[str, Any]] = []
    if request.get("instructions"):
        out.append({"role": "system", "content": request["instructions"]})
    inp = request.get("input")
    if isinstance(inp, str):
        return out + [{"role": "user", "content": inp}]
    if not isinstance(inp, list):
        raise PrepareError("request has no input to render")
    items: list[dict[str, Any]] = []
    for item in inp:
        if not isinstance(item, dict):
            raise PrepareError("input[]: an item must be an object")
        prev = items[-1] if items and items[-1].get("role") == "assistant" else None
        kind = item.get("type")
        if kind == "function_call":
            call = {"id": item.get("call_id"), "function": {"name": item.get("name"), "arguments": item.get("arguments")}, "type": "function"}
            if prev is not None and prev.get("tool_calls") is None:
                prev["tool_calls"] = [call]
            elif prev is not None and isinstance(prev.get("tool_calls"), list):
                prev["tool_calls"].append(call)
            else:
                items.append({"role": "assistant", "tool_calls": [call]})
        elif kind == "reasoning":
            parts = item.get("content") or []
            summary = item.get("summary") or []
            text = parts[0].get("text", "") if parts else (summary[0].get("text", "") if summary else "")
            if prev is not None and prev.get("reasoning") is None:
                prev["reasoning"] = text
            else:
                items.append({"role": "assistant", "reasoning": text})
        elif kind == "function_call_output":
            items.append({"role": "tool", "content": item.get("output"), "tool_call_id": item.get("call_id")})
        elif item.get("role") == "assistant":
            content = item.get("content")
            text = content if isinstance(content, str) else (content[0].get("text") if isinstance(content, list) and content and isinstance(content[0], dict) else None)
            if text is not None:
                if prev is not None and prev.get("content") is None:
                    prev["content"] = text
                else:
                    items.append({"role": "assistant", "content": text})
        elif "role" in item:
            items.append(deep(item))
        else:
            raise PrepareError(f"Unsupported input item type: {kind}")
    return out + items


#: String arguments with more brackets than this are decoded by :func:`postprocess` itself when a
#: request is checked (:func:`plain_chat`): ``json.loads`` could exceed Python's recursion limit.
_PLAIN_MAX_BRACKETS = 200
_SCALARS = (str, int, float, bool, type(None))


def plain_chat(messages: Any) -> bool:
    """True when :func:`chat_messages` (and its :func:`postprocess`) surely returns for
    ``messages`` in either content format, without building anything: a list of objects, each
    with a string ``role``; ``content`` null, a string, or a list of strings and ``text`` parts
    whose ``text`` is a string or null; an assistant's ``tool_calls`` null or a list of objects
    whose ``function`` is an object, string ``arguments`` that ``json.loads`` either decodes or
    rejects with ``JSONDecodeError`` (what postprocess catches). False for anything else, where
    the caller runs :func:`chat_messages` and gets its outcome (a PrepareError, or an exception
    such as ``json.loads``' ValueError for an integer of more than 4,300 digits)."""
    if type(messages) is not list:
        return False
    for m in messages:
        if type(m) is not dict or type(m.get("role")) is not str:
            return False
        content = m.get("content")
        if content is not None and type(content) is not str:
            if type(content) is not list:
                return False
            for p in content:
                if type(p) is str:
                    continue
                if type(p) is not dict or p.get("type") != "text":
                    return False
                text = p.get("text")
                if text is not None and type(text) is not str:
                    return False
        role = m["role"]
        if role == "developer":  # its tools are copied (deep): any depth
            return False
        if role == "assistant":
            calls = m.get("tool_calls")
            if calls is None:
                continue
            if type(calls) is not list:
                return False
            for item in calls:
                fn = item.get("function") if type(item) is dict else None
                if type(fn) is not dict:
                    return False
                # the calls are copied by a recursive walk (deep): only flat ones are certain
                if any(type(v) not in _SCALARS for k, v in item.items() if k != "function") or any(type(v) not in _SCALARS for v in fn.values()):
                    return False
                args = fn.get("arguments")
                if type(args) is str and not _args_decide(args):
                    return False
    return True


def _args_decide(args: str) -> bool:
    """True when ``json.loads(args)`` returns or raises ``JSONDecodeError`` (never another
    exception): orjson reads it (JSON that orjson reads, Python's json reads: 64-bit integers,
    no NaN; nesting bounded by :data:`_PLAIN_MAX_BRACKETS`), else Python's json is asked."""
    if args.count("[") + args.count("{") > _PLAIN_MAX_BRACKETS:
        return False
    try:
        orjson.loads(args)
        return True
    except orjson.JSONDecodeError:
        pass
    try:
        json.loads(args)
    except json.JSONDecodeError:
        return True
    except Exception:  # noqa: BLE001 - postprocess would raise it: the full path records it
        return False
    return True


class NotBuilt(list):
    """The ``messages`` of a :class:`Prepared` made by :meth:`VllmPreparer.prepare_tools`: the
    messages were not built (every renderer of the exchange reads the tools alone). Any read
    raises RuntimeError, so a renderer that does read them fails loudly instead of rendering
    nothing."""

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the messages of this request were not prepared (prepare_tools): use prepare()")

    __iter__ = __len__ = __getitem__ = __bool__ = __contains__ = _fail  # type: ignore[assignment]


class VllmPreparer:
    """The ``vllm`` preparer (module docstring). ``prepare`` raises :class:`PrepareError` where
    vLLM answers HTTP 400 (a message without a role, an unsupported content part type)."""

    name = "vllm"

    def content_format(self, template: str | None) -> str:
        """vLLM's ``auto`` content format for ``template``."""
        return vllm_content_format(template)

    def prepare(self, route: str | None, request: dict[str, Any], content_format: str = "string") -> Prepared:
        if route == "messages":
            msgs, tools = anthropic_messages(request)
            return Prepared(chat_messages(msgs, content_format), tools)
        if route == "responses":
            return Prepared(chat_messages(responses_messages(request), content_format), openai_tools(route, request.get("tools")))
        return Prepared(chat_messages(request.get("messages"), content_format), openai_tools(route, request.get("tools")))

    def prepare_tools(self, route: str | None, request: dict[str, Any], content_format: str = "string") -> Prepared | None:
        """What :meth:`prepare` gives for a renderer that reads only the tools (``tools_only``,
        the json-tools renderer): the same ``tools`` and the same outcome, without building the
        messages (``messages`` is a :class:`NotBuilt`). None when that outcome is not certain
        without building them (another route, a request :func:`plain_chat` does not accept): the
        caller then runs :meth:`prepare`, which raises where it raises."""
        if type(self).prepare is not VllmPreparer.prepare:  # a subclass with its own rules prepares itself
            return None
        if route in ("messages", "responses") or not plain_chat(request.get("messages")):
            return None
        return Prepared(NotBuilt(), openai_tools(route, request.get("tools")))


__all__ = ["VllmPreparer", "chat_messages", "postprocess", "anthropic_messages", "responses_messages", "text_of_parts"]
