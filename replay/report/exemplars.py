"""Exemplars: for each check with ``broken`` or ``still-wrong`` exchanges, a small reproducer
``RUN/exemplars/<check>.json`` and its Markdown block for ``report.md``.

Reads the run's tables only (``exchanges``, ``renders``, ``streams``, ``calls``, through a DuckDB
connection from :func:`replay.sql.connect`); the deltas of a chunking are the raw completion cut
at the lengths the re-stream stage stored (``streams.delta_lengths``), never cut again here.
Message text is masked by :mod:`replay.mask` unless asked otherwise.

What an exemplar shows is bounded (it is text for a pull request; the whole exchange is a
``replay show ID --run RUN`` away): at most :data:`COMPLETION_CHARS` of the raw completion and the
deltas within them (at most :data:`MAX_DELTAS`), :data:`TEXT_CHARS` of each content and call's
arguments, :data:`MAX_CALLS` calls per side; every cut says how much it left out ("… 5,234,112 more
chars; `replay show ID --run RUN`"). Only those prefixes are read from DuckDB and masked, so the
work is proportional to what is shown, not to the completion's size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from replay.mask import declared_names, redact_text, redact_tool, text_sha256

#: Chars of the raw completion an exemplar holds (its deltas are cut from these).
COMPLETION_CHARS = 20_000
#: Deltas an exemplar lists at most.
MAX_DELTAS = 400
#: Chars of each content, call arguments and error an exemplar holds.
TEXT_CHARS = 2_000
#: Calls listed per side.
MAX_CALLS = 10
#: Chars masked past a cut, so that a word at the cut is masked with the context that follows it.
_SLACK = 64


def cut_note(more: int, unit: str, exchange_id: str) -> str:
    """The words that end a cut text or list: ``"… 5,234,112 more chars; `replay show ID --run RUN`"``
    (``unit``: ``chars``, ``deltas``, ``calls``)."""
    return f"… {more:,} more {unit}; `replay show {exchange_id} --run RUN`"


def clip(text: str | None, total: int | None, limit: int, exchange_id: str) -> str | None:
    """``text`` (a prefix of a text of ``total`` chars) cut to ``limit`` chars, followed by
    :func:`cut_note` when the whole text is longer; unchanged when it fits. None stays None."""
    if text is None:
        return None
    total = len(text) if total is None else total
    if total <= limit:
        return text[:limit]
    return text[:limit] + " " + cut_note(total - limit, "chars", exchange_id)


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
    """What ``side`` got under ``chunking`` (content, calls, finish_reason, error), each text read
    from DuckDB as a prefix of :data:`TEXT_CHARS` (+ slack), masked, then cut (:func:`clip`); the
    whole lengths are kept (``content_chars``, a call's ``arguments_chars``, ``calls_total``)."""
    red = (lambda t: redact_text(t, keep, markers)) if redact else (lambda t: t)
    n = TEXT_CHARS + _SLACK

    def shown(text: str | None, total: int | None) -> str | None:
        return clip(red(text), total, TEXT_CHARS, xid)

    s = _rows(
        con,
        "SELECT parser, substr(content, 1, ?) AS content, length(content) AS content_chars, finish_reason, "
        "substr(error, 1, ?) AS error, length(error) AS error_chars, n_deltas FROM streams WHERE exchange_id = ? AND side = ? AND chunking = ?",
        [n, n, xid, side, chunking],
    )
    calls = _rows(
        con,
        "SELECT index, substr(name, 1, ?) AS name, length(name) AS name_chars, substr(arguments, 1, ?) AS arguments, "
        "length(arguments) AS arguments_chars, count(*) OVER () AS calls_total "
        "FROM calls WHERE exchange_id = ? AND side = ? AND chunking = ? ORDER BY index LIMIT ?",
        [n, n, xid, side, chunking, MAX_CALLS],
    )
    row = s[0] if s else {}
    return {
        "parser": row.get("parser"),
        "content": shown(row.get("content"), row.get("content_chars")),
        "content_chars": row.get("content_chars"),
        "calls": [
            {"index": c["index"], "name": clip(c["name"], c["name_chars"], TEXT_CHARS, xid), "arguments": shown(c["arguments"], c["arguments_chars"]),
             "arguments_chars": c["arguments_chars"]}
            for c in calls
        ],
        "calls_total": calls[0]["calls_total"] if calls else 0,
        "finish_reason": row.get("finish_reason"),
        "error": clip(row.get("error"), row.get("error_chars"), TEXT_CHARS, xid),
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


def _deltas(con: Any, ex: dict[str, Any], chunking: str) -> tuple[list[str] | None, str | None, str | None]:
    """The new side's first deltas under ``chunking``, as the re-stream stage cut them: the shown
    prefix of the completion (``ex["completion_head"]``, at most :data:`COMPLETION_CHARS`) cut at that
    row's stored ``delta_lengths`` (nothing is cut again here). Returns ``(deltas, note, cut)``:
    ``deltas`` those that lie within the prefix (at most :data:`MAX_DELTAS`; the first one cut at the
    prefix's end when it alone is longer), or None with ``note`` saying why; ``cut`` a
    :func:`cut_note` for the deltas not listed, else None. Only ``MAX_DELTAS`` lengths and their
    sum are read from DuckDB."""
    text, total = ex["completion_head"], ex["completion_chars"]
    if chunking == "parse":
        return None, "whole-text parse (no deltas)", None
    got = _rows(
        con,
        "SELECT delta_lengths[1:?] AS head, len(delta_lengths) AS n, list_sum(delta_lengths) AS chars "
        "FROM streams WHERE exchange_id = ? AND side = 'new' AND chunking = ?",
        [MAX_DELTAS, ex["exchange_id"], chunking],
    )
    if not got or got[0]["head"] is None or text is None:
        return None, "no delta lengths stored for this chunking (a run written before replay stored them: re-run `replay stream`)", None
    head, n, chars = list(got[0]["head"]), got[0]["n"], got[0]["chars"] or 0
    if chars != total:
        return None, f"deltas not shown: the stored delta lengths add up to {chars:,} chars, the completion has {total:,}", None
    shown_text = text[:COMPLETION_CHARS]
    out, pos = [], 0
    for length in head:
        if pos + length > len(shown_text):
            break
        out.append(shown_text[pos : pos + length])
        pos += length
    if not out and head:  # one delta longer than the shown prefix: its shown part
        out, pos = [shown_text], len(shown_text)
    more = n - len(out)
    cut = None
    if more > 0 or pos < total:
        left = f" ({total - pos:,} chars)" if more > 0 else ""
        cut = cut_note(more, "deltas" + left, ex["exchange_id"]) if more > 0 else cut_note(total - pos, "chars", ex["exchange_id"])
    return out, None, cut


#: What ``report.md`` shows of an exemplar: chars of its deltas' JSON, of each content and
#: arguments, and calls per side (the exemplar file holds more, :data:`TEXT_CHARS`).
MD_DELTAS_CHARS = 2_000
MD_TEXT_CHARS = 300
MD_CALLS = 5


def deltas_shown(deltas: list[str], n_deltas: int | None, xid: str) -> str:
    """The deltas as a JSON list for ``report.md`` and ``report.html``: those whose JSON fits
    :data:`MD_DELTAS_CHARS` (a first delta longer than that cut, ending in ``…``), then a
    :func:`cut_note` for the other ones of the chunking's ``n_deltas``."""
    items, size = [], 2
    for d in deltas:
        j = json.dumps(d, ensure_ascii=False)
        if items and size + len(j) + 2 > MD_DELTAS_CHARS:
            break
        items.append(j if len(j) <= MD_DELTAS_CHARS else j[:MD_DELTAS_CHARS] + "…")
        size += len(j) + 2
    more = (n_deltas if n_deltas is not None else len(deltas)) - len(items)
    return "[" + ", ".join(items) + "]" + (" " + cut_note(more, "deltas", xid) if more > 0 else "")


def _tools(con: Any, ex: dict[str, Any]) -> Any:
    """The request's ``tools`` (None when it has none, or is not a JSON object); read from DuckDB's
    ``json_extract`` so that a long conversation is not loaded, else (DuckDB rejected the JSON)
    from the whole request as Python reads it."""
    if ex["request_ok"]:
        try:
            return json.loads(ex["tools_json"]) if ex["tools_json"] is not None else None
        except ValueError:
            return None
    got = _rows(con, "SELECT request_json FROM exchanges WHERE exchange_id = ?", [ex["exchange_id"]])
    try:
        return json.loads(got[0]["request_json"]).get("tools")
    except (ValueError, AttributeError, IndexError, TypeError):
        return None


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
        # only the request's tools and a prefix of the completion leave DuckDB (its length and
        # SHA-256 are computed there): the work is bounded by what the exemplar shows
        ex = _rows(
            con,
            "SELECT exchange_id, model, route, json_valid(request_json) AS request_ok, "
            "CASE WHEN json_valid(request_json) THEN json_extract(request_json, '$.tools') END AS tools_json, "
            "substr(server_output_text, 1, ?) AS completion_head, length(server_output_text) AS completion_chars, "
            "sha256(server_output_text) AS completion_sha256 FROM exchanges WHERE exchange_id = ?",
            [COMPLETION_CHARS + _SLACK, xid],
        )[0]
        tools = _tools(con, ex)
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
                _code("\n".join(_render_line(side, doc[side]) for side in ("old", "new", "reference"))),
            ]
        else:
            family = _rows(con, "SELECT parser FROM streams WHERE exchange_id = ? AND side = 'reference'", [xid])
            try:
                markers = tuple(get_parser(family[0]["parser"]).markers) if family and family[0]["parser"] else ()
            except ValueError:
                markers = ()
            text = ex["completion_head"]  # at most COMPLETION_CHARS + _SLACK chars of it
            total = ex["completion_chars"] or 0
            deltas, note, deltas_cut = _deltas(con, ex, chunking)
            red_text = redact_text(text, keep, markers) if redact else text
            if deltas is not None and red_text is not None:
                cut, pieces = 0, []
                for d in deltas:  # redaction keeps lengths: cut the redacted text at the same offsets
                    pieces.append(red_text[cut : cut + len(d)])
                    cut += len(d)
                deltas = pieces
            doc.update(
                {
                    "completion": red_text[:COMPLETION_CHARS] if red_text is not None else None,
                    "completion_cut": cut_note(total - COMPLETION_CHARS, "chars", xid) if total > COMPLETION_CHARS else None,
                    "completion_sha256": ex["completion_sha256"],
                    "completion_chars": total,
                    "delta_texts": deltas,
                    "deltas_cut": deltas_cut,
                    "deltas_note": note,
                    "expected": _side_stream(con, xid, "reference", "parse", keep, markers, redact),
                    "got_new": _side_stream(con, xid, "new", chunking, keep, markers, redact),
                    "got_old": _side_stream(con, xid, "old", chunking, keep, markers, redact),
                }
            )
            shown = deltas_shown(deltas, row["deltas"], xid) if deltas is not None else note

            def calls_line(side: dict[str, Any]) -> str:
                listed = side["calls"][:MD_CALLS]
                calls = ", ".join(
                    f"{c['index']}:{c['name']}({clip(c['arguments'], c.get('arguments_chars'), MD_TEXT_CHARS, xid)})" for c in listed
                ) or "none"
                more = (side.get("calls_total") or len(side["calls"])) - len(listed)
                if more > 0:
                    calls += " " + cut_note(more, "calls", xid)
                content, content_chars = side["content"], side.get("content_chars")
                said = json.dumps(content if content is None else content[:MD_TEXT_CHARS], ensure_ascii=False)
                if content is not None and (content_chars or 0) > MD_TEXT_CHARS:
                    said += " " + cut_note(content_chars - MD_TEXT_CHARS, "chars", xid)
                return f"calls {calls}; finish_reason {side['finish_reason']}; content {said}" + (
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


def _render_line(side: str, row: dict | None) -> str:
    """One side's line of a render exemplar in report.md: its serializer, the leaked null paths
    (``tool index`` + JSON path, comma-separated; ``none``), the prompt's SHA-256 prefix and the
    render error (``-`` for none), as text rather than Python reprs."""
    row = row or {}
    nulls = ", ".join(row.get("leaked_nulls") or []) or "none"
    return (f"{side:<9} {row.get('serializer') or '-'}: leaked nulls {nulls}, "
            f"prompt sha256 {(row.get('prompt_sha256') or '-')[:12]}, error {row.get('error') or '-'}")
