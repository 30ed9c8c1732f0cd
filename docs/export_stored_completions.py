"""Export OpenAI stored completions (``store: true``) as files ``replay`` reads (format ``openai-stored``).

Usage (``pip install openai``; ``OPENAI_API_KEY`` and, for another server, ``OPENAI_BASE_URL`` set)::

    python docs/export_stored_completions.py OUT_DIR [--model MODEL] [--metadata KEY=VALUE ...]

What it writes, with the openai SDK's own pagination (``client.chat.completions.list()`` and
``client.chat.completions.messages.list(id)``), into ``OUT_DIR``:

- ``completions.jsonl``: one list page of ``GET /v1/chat/completions`` a line, as the API sent it
  (``{"object": "list", "data": [<chat.completion>, ...], "first_id", "last_id", "has_more"}``);
- ``<completion id>.messages.json``: the request messages of that completion, every page of ``GET
  /v1/chat/completions/{id}/messages`` joined into one page (``{"object": "list", "data":
  [<message with its "id">, ...], "first_id", "last_id", "has_more": false}``). The API's messages
  page does not repeat the completion id, so the file name carries it: this is the convention
  ``replay`` joins by.

``replay audit OUT_DIR`` then reads one exchange per completion, its request rebuilt from the
messages file beside it and the ``tools`` stored on the completion. Raises ``ValueError`` for a
completion id that cannot be a file name; the SDK's ``openai.APIError`` s propagate.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["export", "messages_path"]


def messages_path(out: Path, completion_id: str) -> Path:
    """``out / "<completion_id>.messages.json"``; raises ``ValueError`` when the id holds a path
    separator or is empty (it would not name a file beside the list pages)."""
    if not completion_id or "/" in completion_id or "\\" in completion_id or completion_id in (".", ".."):
        raise ValueError(f"completion id {completion_id!r} cannot be a file name")
    return out / f"{completion_id}.messages.json"


def export(client: Any, out: Path, page_size: int = 100, **list_params: Any) -> int:
    """Write the stored completions ``client`` (an ``openai.OpenAI``) lists into ``out`` (files:
    module docstring); ``page_size``: ``limit`` of each list call (completions and messages);
    ``list_params``: passed to ``client.chat.completions.list`` (``model``, ``metadata``, ``order``).
    Returns the number of completions written."""
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(out / "completions.jsonl", "w", encoding="utf-8") as fh:
        for page in client.chat.completions.list(limit=page_size, **list_params).iter_pages():
            fh.write(json.dumps(page.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n")
            for completion in page.data:
                messages = [m.to_dict() for m in client.chat.completions.messages.list(completion.id, limit=page_size)]
                joined = {"object": "list", "data": messages, "first_id": messages[0]["id"] if messages else None,
                          "last_id": messages[-1]["id"] if messages else None, "has_more": False}
                messages_path(out, completion.id).write_text(json.dumps(joined, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
                n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--model")
    ap.add_argument("--metadata", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    from openai import OpenAI

    params: dict[str, Any] = {}
    if args.model:
        params["model"] = args.model
    if args.metadata:
        params["metadata"] = dict(kv.split("=", 1) for kv in args.metadata)
    n = export(OpenAI(), args.out, **params)
    print(f"wrote {n} stored completions to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
