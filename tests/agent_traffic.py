"""Realistic multi-turn agent traffic, as the OpenAI Python SDK sends it, for rendering tests.

:func:`agent_requests` writes ``n`` Chat Completions request bodies of a coding agent: a system
prompt, a user task, then 1-4 rounds of an assistant tool-call turn (``"content": null``, one or
two calls, ``function.arguments`` as a JSON *string*, ids ``call_...``), one ``tool`` result per
call, and sometimes an assistant text turn and a follow-up user message; the last message is a
user or tool message. Tools: four declarations as an SDK user writes them (one with
``strict: true``); :data:`UNDESCRIBED` is a fifth without description, for templates that require one. Deterministic for a seed (``random.Random``).
"""

from __future__ import annotations

import json
import random
from typing import Any

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file of the repository.",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "run_shell", "description": "Run a shell command.", "strict": True,
                                      "parameters": {"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
                                                     "required": ["command", "timeout"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "edit_file", "description": "Replace text in a file.",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
                                                     "required": ["path", "old", "new"]}}},
    {"type": "function", "function": {"name": "search", "description": "Search the code.",
                                      "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}}},
]

#: A tool declared without a description (the OpenAI SDK allows it; some templates require one).
UNDESCRIBED: dict[str, Any] = {"type": "function", "function": {"name": "list_dir", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}

_ARGS = {
    "read_file": lambda r: {"path": r.choice(["src/app.py", "README.md", "tests/test_app.py", "setup.cfg"])},
    "run_shell": lambda r: {"command": r.choice(["pytest -q", "ls -la", "git status", "python -m build"]), "timeout": r.choice([30, 120])},
    "edit_file": lambda r: {"path": "src/app.py", "old": "return 1", "new": "return 2"},
    "search": lambda r: {"query": r.choice(["def main", "TODO", "import os"]), "limit": r.choice([5, 20])},
}


def agent_requests(n: int = 20, seed: int = 7) -> list[dict[str, Any]]:
    """``n`` request bodies (see the module docstring); each has ``model``, ``messages``, ``tools``."""
    r = random.Random(seed)
    out = []
    call_no = 0
    for _ in range(n):
        msgs: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a coding agent. Use the tools to inspect and change the repository."},
            {"role": "user", "content": r.choice(["Fix the failing test.", "Why does the build fail?", "Rename main to run."])},
        ]
        for _round in range(r.randint(1, 4)):
            calls = []
            for _k in range(r.choice([1, 1, 2])):
                name = r.choice(list(_ARGS))
                call_no += 1
                calls.append({"id": f"call_{call_no:06d}", "type": "function",
                              "function": {"name": name, "arguments": json.dumps(_ARGS[name](r))}})
            msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
            for c in calls:
                msgs.append({"role": "tool", "tool_call_id": c["id"], "content": r.choice(["ok", "1 failed, 3 passed", "def main():\n    return 1\n"])})
            if r.random() < 0.3:
                msgs.append({"role": "assistant", "content": "I found the problem; applying the fix."})
                msgs.append({"role": "user", "content": "Go on."})
        out.append({"model": "agent-model", "messages": msgs, "tools": TOOLS})
    return out
