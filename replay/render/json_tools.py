"""The ``json-tools`` renderer: one JSON line per tool declaration's ``function``.

Several checkpoints' tokenizers put the tool list into the system prompt by ``json.dumps`` of each
tool, one per line (the Qwen / Hermes family's ``<tools>`` block writes ``tool | tojson`` lines).
This renderer keeps only that block: it isolates the tool schemas from the rest of the prompt, so
a difference it shows is a difference in what the tool serializer hands the template.
JSON as transformers' ``tojson`` writes it: ``json.dumps(x, ensure_ascii=False)``, keys in insertion
order, default separators ``", "`` and ``": "``.
"""

from __future__ import annotations

import json
from typing import Any

from replay.render.base import RenderError


class JsonToolsRenderer:
    """Render ``"\\n".join(json.dumps(tool["function"]) for tool in tools)``.

    A tool without a ``function`` object (not OpenAI form) is rendered whole. Messages are not
    rendered. Raises :class:`RenderError` when a tool is not JSON-serializable. ``tools_only``:
    the prompt depends on the tools alone, so the pipeline renders each distinct tool list once.
    """

    name = "json-tools"
    tools_only = True

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        lines = []
        for i, tool in enumerate(tools or ()):
            body = tool.get("function", tool) if isinstance(tool, dict) else tool
            try:
                lines.append(json.dumps(body, ensure_ascii=False))
            except (TypeError, ValueError) as exc:
                raise RenderError(f"tools[{i}] is not JSON-serializable: {exc}") from exc
        return "\n".join(lines)
