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
    """``text`` cut like a tokenizer would: each marker whole, and the text between markers into
    words, whitespace runs and runs of other chars (non-ASCII letters count as word chars). The
    steps join to ``text``."""
    marker_re = "(" + "|".join(re.escape(m) for m in sorted(markers, key=len, reverse=True)) + ")"
    steps: list[str] = []
    for piece in re.split(marker_re, text):
        if piece in markers:
            steps.append(piece)
        elif piece:
            steps.extend(t for t in re.split(r"(\w+|\s+|[^\w\s]+)", piece) if t)
    assert "".join(steps) == text
    return steps


def hermes_call(name: str, arguments: dict[str, Any]) -> str:
    """One Hermes-format call as Qwen2.5 writes it."""
    return f"{START}\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + f"\n{END}"


#: id -> raw completion. ``sg-zurich``: non-ASCII arguments (0.5.4 streams ``\\u00fc``);
#: ``sg-undefined``: a call to a tool the request does not declare (0.5.4 answers the raw text as
#: content, 0.5.23 ''); ``sg-two``: two calls, the second declared tool first (0.5.4 answers
#: tool_index -1 for each; 0.5.23's detectors give each call its tool's position in the request,
#: 1 then 0, and the server answers the call's position, 0 then 1).
COMPLETIONS: dict[str, str] = {
    "sg-zurich": "Let me check the weather.\n" + hermes_call("get_weather", {"city": "Zürich"}),
    "sg-undefined": hermes_call("get_time", {"tz": "Europe/Zurich"}),
    "sg-two": "Comparing both.\n" + hermes_call("read", {"path": "notes/Oslo.md"}) + "\n" + hermes_call("get_weather", {"city": "Paris"}),
}


KIMI = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>")
KIMI_MODEL = "moonshotai/Kimi-K2-Instruct"


def kimi_calls(calls: list[tuple[str, dict[str, Any]]]) -> str:
    """A Kimi K2 tool-call section holding ``calls`` (ids ``functions.NAME:I``)."""
    body = "".join(
        f"{KIMI[2]}functions.{name}:{i}{KIMI[3]}" + json.dumps(args, ensure_ascii=False) + KIMI[4] for i, (name, args) in enumerate(calls)
    )
    return KIMI[0] + body + KIMI[1]


#: id -> (model, raw completion) for vLLM 0.11.0 vs 0.33.0. ``vl-hermes-two``: two Hermes calls
#: after text (0.11.0 streams an extra newline in the content and after each call's arguments);
#: ``vl-undefined``: a call with empty arguments to an undeclared tool (0.11.0 streams arguments
#: '', 0.33.0 '{}'); ``vl-kimi-two``: two Kimi K2 calls (0.11.0's whole-text parse gives one
#: call, the first name with the second's arguments).
VLLM_COMPLETIONS: dict[str, tuple[str, str]] = {
    "vl-hermes-two": (MODEL, COMPLETIONS["sg-two"]),
    "vl-undefined": (MODEL, hermes_call("get_time", {})),
    "vl-kimi-two": (KIMI_MODEL, "Checking." + kimi_calls([("get_weather", {"city": "Paris"}), ("read", {"path": "notes/Oslo.md"})])),
}


def exchanges(completions: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The capture's records (format v1), one per completion of ``completions`` (default
    :data:`COMPLETIONS`; values are texts of :data:`MODEL` or ``(model, text)`` pairs)."""
    out = []
    for i, (xid, value) in enumerate((completions or COMPLETIONS).items()):
        model, text = value if isinstance(value, tuple) else (MODEL, value)
        markers = KIMI if model == KIMI_MODEL else (START, END)
        out.append(
            {
                "id": xid,
                "ts": f"2026-11-30T12:0{i}:00Z",
                "route": "chat.completions",
                "model": model,
                "request": {
                    "model": model,
                    "messages": [{"role": "user", "content": "Weather in Zürich, and compare Paris with my Oslo notes."}],
                    "tools": TOOLS,
                    "stream": True,
                },
                "server": {"output_text": text, "steps": token_steps(text, markers)},
            }
        )
    return out


def write_capture(path: Path, completions: dict[str, Any] | None = None) -> Path:
    """Write :func:`exchanges` of ``completions`` as JSON lines to ``path``; returns it."""
    path.write_text("".join(json.dumps(ex, ensure_ascii=False) + "\n" for ex in exchanges(completions)), encoding="utf-8")
    return path
