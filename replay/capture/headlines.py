"""Headline sentences about capture formats and the served-side checks, for ``report.md`` and the terminal.

Words only: the numbers come from ``queries/capture_formats.sql`` and ``queries/served_checks.sql``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

__all__ = ["LACK_WORDS", "capture_headlines"]

#: How each ``capture_lacks`` value is said, and what follows from it.
LACK_WORDS = {
    "request": "no request (nothing to render)",
    "exact_request": "request rebuilt from logged fields",
    "prompt": "no rendered prompt",
    "raw_completion": "no raw completion, not re-streamed",
    "stream": "no chunks (served side checked on the final response only)",
    "response": "no response",
    "served": "no served response (no served-side checks)",
    "tools": "no tool declarations logged (the request may have had some)",
    "tool_shape": "tool declarations converted from the flat GenAI form to the Chat Completions shape",
}

_COLS = (
    ("request", "lacking_request"),
    ("exact_request", "lacking_exact_request"),
    ("raw_completion", "lacking_raw_completion"),
    ("stream", "lacking_stream"),
    ("response", "lacking_response"),
    ("served", "lacking_served"),
    ("tools", "lacking_tools"),
    ("tool_shape", "lacking_tool_shape"),
)


def _n(count: int, noun: str) -> str:
    if count == 1:
        return f"1 {noun}"
    return f"{count:,} " + (noun[: -len("index")] + "indices" if noun.endswith("index") else noun + "s")


def capture_headlines(results: dict[str, pa.Table]) -> list[str]:
    """Sentences from the ``capture_formats`` and ``served_checks`` query results (Arrow tables by
    query name): one per capture format other than v1 ("22 exchanges from sse: no raw completion,
    not re-streamed; 22 with no request (nothing to render)."), and one with the served-side check
    counts when any exchange was served. Returns ``[]`` when the results are missing."""
    out: list[str] = []
    fmts = results.get("capture_formats")
    for row in fmts.to_pylist() if fmts is not None else ():
        if row["capture_format"] == "v1":
            continue
        n = row["exchanges"]
        said: list[str] = []
        for lack, col in _COLS:
            c = row.get(col) or 0
            if c:
                said.append(LACK_WORDS[lack] if c == n else f"{c:,} with {LACK_WORDS[lack]}")
        out.append(f"{_n(n, 'exchange')} from {row['capture_format']}" + (": " + "; ".join(said) if said else "") + ".")
    checks = results.get("served_checks")
    rows = checks.to_pylist() if checks is not None else []
    if rows:
        # a total is None when every row's count is None (nothing of that kind was judged: no stream)
        tot: dict[str, Any] = {}
        for k in ("exchanges", "served", "streamed", "calls", "non_json_calls", "name_repeats", "index_faults",
                  "markup_in_content", "stop_with_calls"):
            got = [r[k] for r in rows if r.get(k) is not None]
            tot[k] = sum(got) if got else None
        if tot["served"]:
            def count(key: str, noun: str, what: str) -> str | None:
                return None if tot[key] is None else f"{_n(tot[key], noun)} {what}"

            said = [
                None if tot["non_json_calls"] is None else f"{tot['non_json_calls']:,} with non-JSON arguments",
                count("name_repeats", "name", "sent twice"),
                count("index_faults", "call index", "out of order"),
                count("markup_in_content", "content", "with call markup"),
                count("stop_with_calls", "finish_reason", "`stop` with calls"),
            ]
            unjudged = [w for w, c in (("non-JSON arguments", "non_json_calls"), ("names sent twice", "name_repeats"),
                                       ("call index order", "index_faults"), ("`stop` with calls", "stop_with_calls")) if tot[c] is None]
            out.append(
                f"Served side, from what clients received alone ({_n(tot['served'], 'exchange')}, {tot['streamed']:,} streamed; "
                f"{_n(tot['calls'] or 0, 'call')}): " + ", ".join(w for w in said if w is not None)
                + (f"; not measured (nothing to judge): {', '.join(unjudged)}" if unjudged else "") + "."
            )
    return out
