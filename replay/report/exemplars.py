"""Exemplars: for each check with ``broken`` or ``still-wrong`` exchanges, a small reproducer
``RUN/exemplars/<check>.json`` and its Markdown block for ``report.md``.

Reads the run's tables only (``exchanges``, ``renders``, ``streams``, ``calls``, through a DuckDB
connection from :func:`replay.sql.connect`); the deltas of a chunking are the raw completion cut
at the lengths the re-stream stage stored (``streams.delta_lengths``), never cut again here.
Message text is masked by :mod:`replay.mask` unless asked otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from replay.mask import declared_names, redact_text, redact_tool, text_sha256

@dataclass
class Exemplar:
    """The exemplar of one check: its counts, the exchange and chunking chosen (smallest failing
    chunking, from ``queries/smallest_failures.sql``), the file written and a Markdown block."""

    check: str
    broken: int
    still_wrong: int
    exchange_id: str
    verdict: str
    chunking: str
    deltas: int
    path: Path
    markdown: str


def _rows(con: Any, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cur = con.execute(sql, params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _side_stream(con: Any, xid: str, side: str, chunking: str, keep: set[str], markers: tuple[str, ...], redact: bool) -> dict[str, Any]:
    red = (lambda t: redact_text(t, keep, markers)) if redact else (lambda t: t)
    s = _rows(con, "SELECT parser, content, finish_reason, error, n_deltas FROM streams WHERE exchange_id = ? AND side = ? AND chunking = ?", [xid, side, chunking])
    calls = _rows(
        con,
        "SELECT index, name, arguments FROM calls WHERE exchange_id = ? AND side = ? AND chunking = ? ORDER BY index",
        [xid, side, chunking],
    )
    row = s[0] if s else {}
    return {
        "parser": row.get("parser"),
        "content": red(row.get("content")),
        "calls": [{"index": c["index"], "name": c["name"], "arguments": red(c["arguments"])} for c in calls],
        "finish_reason": row.get("finish_reason"),
        "error": row.get("error"),
    }


def cut_at(text: str, lengths: list[int]) -> list[str]:
    """``text`` cut into consecutive pieces of ``lengths`` chars (code points), in order: the
    deltas of a chunking from its stored ``streams.delta_lengths``. Raises ValueError when the
    lengths do not add up to ``len(text)`` (the deltas were not the completion, cut)."""
    if sum(lengths) != len(text):
        raise ValueError(f"the stored delta lengths add up to {sum(lengths):,} chars, the completion has {len(text):,}")
    out, pos = [], 0
    for n in lengths:
        out.append(text[pos : pos + n])
        pos += n
    return out


def _deltas(con: Any, ex: dict[str, Any], chunking: str) -> tuple[list[str] | None, str | None]:
    """The new side's deltas under ``chunking``, as the re-stream stage cut them: the completion
    cut at that row's stored ``delta_lengths`` (nothing is cut again here), or ``(None, note)``."""
    text = ex["server_output_text"]
    if chunking == "parse":
        return None, "whole-text parse (no deltas)"
    got = _rows(con, "SELECT delta_lengths FROM streams WHERE exchange_id = ? AND side = 'new' AND chunking = ?", [ex["exchange_id"], chunking])
    lengths = got[0]["delta_lengths"] if got else None
    if lengths is None or text is None:
        return None, "no delta lengths stored for this chunking (a run written before replay stored them: re-run `replay stream`)"
    try:
        return cut_at(text, list(lengths)), None
    except ValueError as exc:
        return None, f"deltas not shown: {exc}"


def _code(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{text}\n{fence}"


def write_exemplars(con: Any, run_dir: Path, meta: dict[str, Any], smallest: pa.Table, *, redact: bool = True) -> list[Exemplar]:
    """Write ``RUN/exemplars/<check>.json`` for each row of the ``smallest_failures`` query and
    return the exemplars (with a Markdown block for ``report.md``).

    Stream checks: the declared tool names, the raw completion, its deltas under the smallest
    failing chunking, and what the reference (expected), the new and the old side got (content,
    calls, finish_reason). Render checks: the tool declarations and each side's serializer, leaked
    null paths, prompt SHA-256 and error. With ``redact`` (the default) every text is masked by
    :func:`redact_text` (tool and parameter names, markers and JSON structure kept; the original's
    SHA-256 given) and the tool declarations' descriptions and examples by :func:`redact_tool`; a stale ``exemplars/`` folder's JSON files are removed first.
    ``meta`` (``run.json``) is not read: the deltas come from ``streams.delta_lengths``.
    """
    from replay.parsers import get_parser

    folder = Path(run_dir) / "exemplars"
    if folder.is_dir():
        for old in folder.glob("*.json"):
            old.unlink()
    out: list[Exemplar] = []
    for row in smallest.to_pylist():
        xid, check, chunking = row["exchange_id"], row["check"], row["chunking"]
        ex = _rows(
            con,
            "SELECT exchange_id, model, route, request_json, server_output_text, server_steps FROM exchanges WHERE exchange_id = ?",
            [xid],
        )[0]
        try:
            tools = json.loads(ex["request_json"]).get("tools")
        except (ValueError, AttributeError):
            tools = None
        keep = declared_names(tools)
        doc: dict[str, Any] = {
            "check": check,
            "verdict": row["verdict"],
            "exchange_id": xid,
            "model": ex["model"],
            "chunking": chunking,
            "deltas": row["deltas"],
            "redacted": redact,
            "tool_names": sorted(n for n in keep if isinstance(tools, list) and any(_tool_name(t) == n for t in tools)),
        }
        if chunking == "render":
            doc["tools"] = redact_tool(tools, keep) if redact else tools
            for side in ("old", "new", "reference"):
                r = _rows(
                    con,
                    "SELECT serializer, prompt_sha256, prompt_chars, [x.tool_index::VARCHAR || ' ' || x.path FOR x IN leaked_nulls] AS leaked_nulls, error "
                    "FROM renders WHERE exchange_id = ? AND side = ?",
                    [xid, side],
                )
                doc[side] = r[0] if r else None
            block = [
                f"Exchange `{xid}` ({row['verdict']}), tools {', '.join(f'`{n}`' for n in doc['tool_names']) or 'none'}:",
                "",
                _code(
                    "\n".join(
                        f"{side:<9} {(doc[side] or {}).get('serializer')}: leaked nulls {(doc[side] or {}).get('leaked_nulls')}, "
                        f"prompt sha256 {((doc[side] or {}).get('prompt_sha256') or '-')[:12]}, error {(doc[side] or {}).get('error')}"
                        for side in ("old", "new", "reference")
                    )
                ),
            ]
        else:
            family = _rows(con, "SELECT parser FROM streams WHERE exchange_id = ? AND side = 'reference'", [xid])
            try:
                markers = tuple(get_parser(family[0]["parser"]).markers) if family and family[0]["parser"] else ()
            except ValueError:
                markers = ()
            text = ex["server_output_text"]
            deltas, note = _deltas(con, ex, chunking)
            red_text = redact_text(text, keep, markers) if redact else text
            if deltas is not None and red_text is not None:
                cut, pieces = 0, []
                for d in deltas:  # redaction keeps lengths: cut the redacted text at the same offsets
                    pieces.append(red_text[cut : cut + len(d)])
                    cut += len(d)
                deltas = pieces
            doc.update(
                {
                    "completion": red_text,
                    "completion_sha256": text_sha256(text),
                    "completion_chars": len(text or ""),
                    "delta_texts": deltas,
                    "deltas_note": note,
                    "expected": _side_stream(con, xid, "reference", "parse", keep, markers, redact),
                    "got_new": _side_stream(con, xid, "new", chunking, keep, markers, redact),
                    "got_old": _side_stream(con, xid, "old", chunking, keep, markers, redact),
                }
            )
            shown = json.dumps(deltas, ensure_ascii=False) if deltas is not None else note
            if deltas is not None and len(shown) > 2000:
                shown = shown[:2000] + " …"

            def calls_line(side: dict[str, Any]) -> str:
                calls = ", ".join(f"{c['index']}:{c['name']}({c['arguments']})" for c in side["calls"]) or "none"
                return f"calls {calls}; finish_reason {side['finish_reason']}; content {json.dumps(side['content'], ensure_ascii=False)}" + (
                    f"; error {side['error']}" if side.get("error") else ""
                )

            block = [
                f"Exchange `{xid}` ({row['verdict']}), model `{ex['model']}`, tools {', '.join(f'`{n}`' for n in doc['tool_names']) or 'none'}; "
                f"smallest failing chunking `{chunking}` ({row['deltas']} delta{'' if row['deltas'] == 1 else 's'}):",
                "",
                _code(
                    f"deltas   {shown}\n"
                    f"expected {calls_line(doc['expected'])}\n"
                    f"new      {calls_line(doc['got_new'])}\n"
                    f"old      {calls_line(doc['got_old'])}"
                ),
            ]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{check}.json"
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
        block.append("")
        block.append(f"Reproducer: `exemplars/{check}.json`" + (" (message text redacted)." if redact else " (not redacted)."))
        out.append(
            Exemplar(
                check=check,
                broken=row["broken"],
                still_wrong=row["still_wrong"],
                exchange_id=xid,
                verdict=row["verdict"],
                chunking=chunking,
                deltas=row["deltas"],
                path=path,
                markdown="\n".join(block),
            )
        )
    return out


def _tool_name(tool: Any) -> str | None:
    if not isinstance(tool, dict):
        return None
    fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    name = fn.get("name")
    return name if isinstance(name, str) else None
