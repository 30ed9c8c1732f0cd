"""Captures (format v1) written for the real-release tests: outputs on which SGLang 0.5.4 and
0.5.23 (and vLLM 0.11.0 and 0.33.0) are known to differ (``../shared/docs/real-engines.md``).

Each exchange has the request's tools, ``server.output_text`` (the raw completion) and
``server.steps`` cut at token-like boundaries (every marker whole, then words, spaces and runs of
punctuation: the detectors expect each special token to arrive whole in one delta).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

START, END = "<tool_call>", "</tool_call>"
MODEL = "Qwen/Qwen2.5-7B-Instruct"  # picks the hermes family (SGLang qwen25, vLLM hermes)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather forecast for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
]


def token_steps(text: str, markers: tuple[str, ...] = (START, END)) -> list[str]:
    """``text`` cut like a tokenizer would: markers whole, then words, whitespace runs, and runs
    of other chars (non-ASCII letters count as word chars). The steps join to ``text``."""
    pattern = "(" + "|".join(re.escape(m) for m in markers) + r"|\w+|\s+|[^\w\s]+)"
    steps = [t for t in re.split(pattern, text) if t]
    assert "".join(steps) == text
    return steps


def hermes_call(name: str, arguments: dict[str, Any]) -> str:
    """One Hermes-format call as Qwen2.5 writes it."""
    return f"{START}\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + f"\n{END}"


#: id -> raw completion. ``sg-zurich``: non-ASCII arguments (0.5.4 streams ``\\u00fc``);
#: ``sg-undefined``: a call to a tool the request does not declare (0.5.4 answers the raw text as
#: content, 0.5.23 ''); ``sg-two``: two calls (0.5.4 answers tool_index -1 for each).
COMPLETIONS: dict[str, str] = {
    "sg-zurich": "Let me check the weather.\n" + hermes_call("get_weather", {"city": "Zürich"}),
    "sg-undefined": hermes_call("get_time", {"tz": "Europe/Zurich"}),
    "sg-two": "Comparing both.\n" + hermes_call("get_weather", {"city": "Paris"}) + "\n" + hermes_call("read", {"path": "notes/Oslo.md"}),
}


def exchanges() -> list[dict[str, Any]]:
    """The capture's records (format v1), one per completion of :data:`COMPLETIONS`."""
    out = []
    for i, (xid, text) in enumerate(COMPLETIONS.items()):
        out.append(
            {
                "id": xid,
                "ts": f"2026-11-30T12:0{i}:00Z",
                "route": "chat.completions",
                "model": MODEL,
                "request": {
                    "model": MODEL,
                    "messages": [{"role": "user", "content": "Weather in Zürich, and compare Paris with my Oslo notes."}],
                    "tools": TOOLS,
                    "stream": True,
                },
                "server": {"output_text": text, "steps": token_steps(text)},
            }
        )
    return out


def write_capture(path: Path) -> Path:
    """Write :func:`exchanges` as JSON lines to ``path``; returns it."""
    path.write_text("".join(json.dumps(ex, ensure_ascii=False) + "\n" for ex in exchanges()), encoding="utf-8")
    return path
