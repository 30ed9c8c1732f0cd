"""A small checkpoint-style prompt encoder, written for the tests of ``--reference-encoder``.

It follows the calling convention of the Python encoders some checkpoints ship (DeepSeek V3.2/V4):
``encode_messages(messages, thinking_mode, ...) -> str`` with OpenAI-style message dicts, the tool
declarations given as ``tools`` of the system message. The format itself is made up:

    <|bos|>[SYS]{system}[TOOLS]{one JSON line per tool's function}[/TOOLS][/SYS]
    [U]{user}[/U][A]{assistant}[/A] ... [A]            (thinking_mode "thinking": [A]<think>)

It writes each tool's ``name``, ``description`` (``""`` when missing) and ``parameters`` only, in
that order, keys as given, JSON with ``", "``/``": "`` separators: never ``strict``.
"""

from __future__ import annotations

import json


def _tool_line(tool: dict) -> str:
    fn = tool.get("function", tool)
    if fn.get("description") is not None and not isinstance(fn.get("description"), str):
        raise ValueError(f"tool {fn.get('name')!r}: description must be a string")
    body = {"name": fn["name"], "description": fn.get("description") or "", "parameters": fn.get("parameters") or {}}
    return json.dumps(body, ensure_ascii=False)


def encode_messages(messages: list[dict], thinking_mode: str, context: list[dict] | None = None, add_default_bos_token: bool = True) -> str:
    """The prompt text of ``messages``; raises ValueError for an unknown role or thinking mode."""
    if thinking_mode not in ("chat", "thinking"):
        raise ValueError(f"invalid thinking_mode {thinking_mode!r}")
    out = "<|bos|>" if add_default_bos_token else ""
    for m in messages:
        role = m.get("role")
        if role == "system":
            out += "[SYS]" + (m.get("content") or "")
            if m.get("tools"):
                out += "[TOOLS]" + "\n".join(_tool_line(t) for t in m["tools"]) + "[/TOOLS]"
            out += "[/SYS]"
        elif role == "user":
            out += "[U]" + m["content"] + "[/U]"
        elif role == "assistant":
            out += "[A]" + (m.get("content") or "") + "[/A]"
        else:
            raise ValueError(f"unknown role {role!r}")
    return out + ("[A]<think>" if thinking_mode == "thinking" else "[A]")


def encode_with_tools(messages: list[dict], tools: list[dict] | None = None) -> str:
    """The same format, for an encoder that takes ``tools`` as its own argument."""
    msgs = [dict(m) for m in messages]
    if tools:
        if not msgs or msgs[0].get("role") != "system":
            msgs.insert(0, {"role": "system", "content": ""})
        msgs[0]["tools"] = tools
    return encode_messages(msgs, "chat")


def encode_ids(messages: list[dict], tools: list[dict] | None = None) -> list[int]:
    """Token ids of the prompt: one id per UTF-8 byte (a byte-level toy vocabulary)."""
    return list(encode_with_tools(messages, tools).encode("utf-8"))


def decode(ids: list[int]) -> str:
    """Text of byte-level ids."""
    return bytes(ids).decode("utf-8")
