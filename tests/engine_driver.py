"""Run one framework parser spec over completions, inside a framework's venv; JSON in, JSON out.

    PYTHONPATH=<checkout> <venv>/bin/python tests/engine_driver.py SPEC < items.json > answers.json

``items.json``: a list of ``{"text": T, "tools": [...] | null, "chunkings": {LABEL: [DELTA, ...]}}``.
Answer per item: ``{"parse": {"content", "calls": [[name, arguments, index], ...]},
"streams": {LABEL: {"content", "calls": [[index, name, arguments], ...], "finish_reason"}}}``,
with the parser resolved by :func:`replay.parsers.get_parser` (so through :mod:`replay.adapters`)
and each stream joined by :func:`replay.stream.assemble_openai`. A parser exception becomes
``{"error": "Type: message"}`` in its place. Imports only the standard library and ``replay``'s
stdlib-only modules, plus the framework.

Used by the real-release tests to read what the audit tables cannot hold (the ``index`` a
non-streaming response carries) and to replay without the out-of-process side.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    """Answer the items on stdin for the spec in ``argv[1]``; returns 0. Whatever the framework
    prints (vLLM logs to stdout) goes to stderr: the answer is written to a duplicate of the
    original stdout, and file descriptor 1 is pointed at stderr."""
    import os

    answer_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from replay.parsers import get_parser
    from replay.stream import replay_stream

    cls = get_parser(sys.argv[1])
    out = []
    for item in json.load(sys.stdin):
        tools, text = item.get("tools"), item["text"]
        answer: dict = {"name": cls.name, "markers": list(cls.markers)}
        try:
            res = cls(tools).parse(text)
            answer["parse"] = {"content": res.content, "calls": [[c.name, c.arguments, getattr(c, "index", i)] for i, c in enumerate(res.calls)]}
        except Exception as exc:  # reported, not fatal
            answer["parse"] = {"error": f"{type(exc).__name__}: {exc}"}
        answer["streams"] = {}
        for label, deltas in (item.get("chunkings") or {}).items():
            try:
                got = replay_stream(cls, tools, deltas)
                answer["streams"][label] = {
                    "content": got.content,
                    "calls": [[c.index, c.name, c.arguments] for c in got.calls],
                    "finish_reason": got.finish_reason,
                }
            except Exception as exc:
                answer["streams"][label] = {"error": f"{type(exc).__name__}: {exc}"}
        out.append(answer)
    json.dump(out, answer_out, ensure_ascii=False)
    answer_out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
