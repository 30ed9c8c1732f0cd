"""Verdicts, ``--fail-on`` gates, content leaks and redacted exemplars.

The counting lives in SQL (``queries/verdicts.sql``, ``verdict_exchanges.sql``, ``fidelity.sql``
and the views ``queries/_*.sql``); this module holds what the SQL needs computed where the rows
are made (:func:`markup_leak`), the ``--fail-on`` expressions (:func:`parse_fail_on`,
:func:`tripped`) and the exemplars written for each check with ``broken`` or ``still-wrong``
exchanges (:func:`write_exemplars`), redacted by default (:func:`redact_text`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa

#: The checks of the old and new sides in the verdict table, in its row order (``queries/verdicts.sql``).
CHECKS: tuple[str, ...] = (
    "null-leak",
    "prompt-divergence",
    "render-failure",
    "replay-error",
    "client-error",
    "dropped-call",
    "non-json-join",
    "argument-mismatch",
    "content-leak",
    "name-repeat",
    "call-id",
    "finish-reason",
    "streaming-fault",
    "semantic-diff",
)
#: The checks of the served side (rows ``served:CHECK`` of the verdict table, from the captured
#: streams and responses: the ``served_*`` columns of ``exchanges``), gated by ``served:CHECK>N``.
SERVED_CHECKS: tuple[str, ...] = (
    "client-error",
    "name-repeat",
    "call-id",
    "index-fault",
    "non-json-join",
    "content-leak",
    "finish-reason",
)
#: The verdicts, in the table's column order; each exchange of a check has exactly one.
VERDICTS: tuple[str, ...] = ("fixed", "improved", "broken", "same-ok", "still-wrong", "changed-wrong", "unreliable")

#: Exit code of ``replay audit`` / ``replay report`` when a ``--fail-on`` condition holds.
FAIL_ON_EXIT = 3


def markup_leak(content: str | None, reference_content: str | None, markers: Iterable[str]) -> bool:
    """True when ``content`` (what a client assembles) holds call markup the reference does not.

    ``markers``: the family parser's special tokens (``<tool_call>``, ``[TOOL_CALLS]``, DeepSeek's
    tool-calls-begin token ...; the parser classes' ``markers``). A marker leaks when it occurs more
    often in ``content`` than in ``reference_content`` (a whole-text parse may itself leave markup
    in content for malformed output: a side is wrong only where it leaves more). With
    ``reference_content`` None: any marker in ``content``. Counts are of non-overlapping occurrences.
    """
    if not content:
        return False
    ref = reference_content or ""
    return any(m and content.count(m) > ref.count(m) for m in markers)


# ------------------------------------------------------------------------------------- --fail-on
class FailOnError(ValueError):
    """A ``--fail-on`` expression that does not parse, or names an unknown check or verdict."""


@dataclass(frozen=True)
class FailOn:
    """One gate: fail when ``verdict`` count of ``check`` (any check when None) exceeds ``limit``."""

    check: str | None
    verdict: str
    limit: int
    text: str


_EXPR = re.compile(r"^\s*(?:(?P<check>[a-z-]+)\s*:\s*)?(?P<verdict>[a-z-]+)\s*(?:>\s*(?P<limit>\d+))?\s*$")


def parse_fail_on(expr: str) -> FailOn:
    """Parse ``VERDICT``, ``VERDICT>N``, ``CHECK:VERDICT``, ``CHECK:VERDICT>N`` or
    ``served:CHECK>N`` (N defaults to 0).

    ``broken`` fails when any check has a broken exchange; ``dropped-call:broken>0`` when that check
    has one; ``null-leak:still-wrong>10`` when more than 10 exchanges still leak;
    ``served:name-repeat>0`` when a served stream sent a name twice (the ``served:name-repeat``
    row's ``wrong`` column). Raises :class:`FailOnError` naming the valid checks and verdicts.
    """
    m = _EXPR.match(expr or "")
    if not m:
        raise FailOnError(
            f"--fail-on {expr!r}: expected VERDICT, CHECK:VERDICT, CHECK:VERDICT>N or served:CHECK>N "
            "(e.g. broken, dropped-call:broken>0, served:name-repeat>0)"
        )
    check, verdict, limit = m.group("check"), m.group("verdict"), int(m.group("limit") or 0)
    if check == "served":
        if verdict not in SERVED_CHECKS:
            raise FailOnError(f"--fail-on {expr!r}: unknown served check {verdict!r}; served checks: {', '.join(SERVED_CHECKS)}")
        return FailOn(check=f"served:{verdict}", verdict="wrong", limit=limit, text=expr.strip())
    if check is not None and check not in CHECKS:
        raise FailOnError(f"--fail-on {expr!r}: unknown check {check!r}; checks: {', '.join(CHECKS)}, or served:CHECK")
    if verdict not in VERDICTS + ("not-judged",):
        raise FailOnError(f"--fail-on {expr!r}: unknown verdict {verdict!r}; verdicts: {', '.join(VERDICTS)}, not-judged")
    return FailOn(check=check, verdict=verdict, limit=limit, text=expr.strip())


def tripped(gates: Iterable[FailOn], verdicts: pa.Table) -> list[str]:
    """The gates that hold on a ``verdicts`` query result, each as a line naming what tripped
    (``--fail-on dropped-call:broken>0: dropped-call has 2 broken exchanges``); empty when none.
    A gate without a check reads every check of the old and new sides (not the served rows)."""
    rows = {r["check"]: r for r in verdicts.to_pylist()}
    out = []
    for g in gates:
        for check in [g.check] if g.check else [c for c in rows if not c.startswith("served:")]:
            n = (rows.get(check) or {}).get(g.verdict) or 0
            if n > g.limit:
                plural = "s" if n != 1 else ""
                if g.verdict == "wrong":
                    out.append(f"--fail-on {g.text}: {check} is wrong on {n:,} exchange{plural} (limit {g.limit:,})")
                else:
                    out.append(f"--fail-on {g.text}: {check} has {n:,} {g.verdict} exchange{plural} (limit {g.limit:,})")
    return out


#: The table a check's stage writes: render checks need ``renders``, stream checks ``streams``.
CHECK_TABLE: dict[str, str] = {
    **{c: "renders" for c in ("null-leak", "prompt-divergence", "render-failure")},
    **{c: "streams" for c in CHECKS[3:]},
    **{f"served:{c}": "exchanges" for c in SERVED_CHECKS},
}


def unjudged(gates: Iterable[FailOn], run_dir: Any) -> list[str]:
    """The gates naming a check (or, with no check, any check) whose stage never ran in the run
    folder ``run_dir`` (its ``renders.parquet`` or ``streams.parquet`` absent, as after
    ``replay ingest`` alone), each as a line saying which; empty when every gate can be judged.
    A gate there would read a count of 0 and pass without anything judged."""
    from pathlib import Path

    out = []
    for g in gates:
        for check in [g.check] if g.check else list(CHECKS):
            table = CHECK_TABLE[check]
            if not (Path(run_dir) / f"{table}.parquet").exists():
                stage = {"renders": "render", "streams": "stream"}.get(table, "ingest")
                out.append(
                    f"--fail-on {g.text}: nothing judged for {check}: the run has no {table}.parquet "
                    f"(run `replay {stage} --run {run_dir}`, or `replay audit`)"
                )
                break
    return out


# ------------------------------------------------------------------------------------- redaction
#: The words of the call syntaxes (Hermes/Mistral ``name``/``arguments``, Llama 3 ``parameters``,
#: Qwen3-Coder/Seed-OSS ``<function=…>``/``<parameter=…>``, DSML/MiniMax ``invoke`` and
#: ``string="true"``, Harmony channels and ``to=functions.…``/``json``, Gemma ``call:``, Kimi
#: ``functions.``) and the JSON literals. :func:`redact_text` keeps one only where it stands in the
#: syntax (:func:`_structural_at`), never in prose: "the arguments are null" is masked whole.
STRUCTURAL_WORDS = frozenset(
    "name arguments parameters parameter function functions type true false null invoke call string "
    "commentary analysis final json assistant to constrain tool_call tool_calls function_calls python_tag think".split()
)
_LITERALS = frozenset(("true", "false", "null"))
_QUOTE = re.compile(r'(?<!\\)"')

_WORD = re.compile(r"\\u[0-9a-fA-F]{4}|\\.|[A-Za-z0-9_\u0080-\U0010ffff]+", re.S)
_NUMBER = re.compile(r"[0-9]+(?:[eE][0-9]*)?")


def _mask(word: str) -> str:
    if _NUMBER.fullmatch(word):  # 1 then 0s: no leading zero, so a JSON number stays one
        return re.sub(r"[0-9]+", lambda m: "1" + "0" * (len(m.group(0)) - 1), word)
    return "x" * len(word)


def _structural_at(text: str, start: int, end: int, after_marker: bool) -> bool:
    """Whether the structural word ``text[start:end]`` stands in a call syntax (kept) rather than in
    prose or inside a string value (masked). Syntax positions, from the families' formats:

    - right after a family marker (``<|channel|>commentary``, ``<|constrain|>json``) or after
      ``<``, ``</`` or ``=`` (``<function=``, ``</parameter>``, ``to=functions``);
    - right before ``=`` (``to=``, ``name="``), or before ``.`` or ``:`` that a name follows
      without a space (``functions.read``, Gemma ``call:read``);
    - a quoted JSON key: ``"arguments"`` followed by ``:``;
    - a JSON literal (``true``, ``false``, ``null``) as a bare token after ``:``, ``[`` or ``,`` and
      before ``,``, ``}`` or ``]`` inside an open ``{`` or ``[``, or as a quoted attribute value
      (``string="true"``).
    """
    word = text[start:end]
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    follows = text[end + 1] if end + 1 < len(text) else ""
    if (after_marker and start == 0) or before in ("<", "=") or text[max(0, start - 2) : start] == "</":
        return True
    if before == "." and start >= 2 and (text[start - 2].isalnum() or text[start - 2] == "_"):
        return True  # functions.read: the name after the namespace
    if after == "=" or (after in (".", ":") and follows and (follows.isalnum() or follows == "_")):
        return True  # to=, name=", functions.read, call:read; not a sentence's "... null." or "null: x"
    if before == '"' and after == '"':
        rest = text[end + 1 :].lstrip()
        if rest.startswith(":"):
            return True
        if word in _LITERALS and text[max(0, start - 2) : start] == '="':
            return True
        return False
    if word in _LITERALS and before != '"':
        prev = text[:start].rstrip()[-1:]
        nxt = text[end:].lstrip()[:1]
        if not (prev in (":", "[", ",") and nxt in (",", "}", "]")):
            return False
        head = text[:start]  # inside an open JSON object or array, not a prose list "a, null, b",
        if len(_QUOTE.findall(head)) % 2:  # and not inside a string value "a, null, b"
            return False
        return head.count("{") + head.count("[") > head.count("}") + head.count("]")
    return False


def redact_text(text: str | None, keep: Iterable[str] = (), markers: Iterable[str] = ()) -> str | None:
    """``text`` with its message text masked, length and structure kept (chars).

    Every run of letters, digits, ``_`` and non-ASCII chars is replaced by as many ``x`` (a number
    by ``1`` and ``0``s, an exponent's ``e`` kept), except the words in ``keep`` (the request's tool
    and parameter names) and a word of :data:`STRUCTURAL_WORDS` where it stands in a call syntax
    or is a JSON literal (:func:`_structural_at`); the same word in prose or inside a string value
    (``"the arguments are null"``, ``"null"``) is masked. ``markers`` (the family's special tokens)
    are kept whole; a JSON escape ``\\n`` is kept and ``\\uXXXX`` becomes ``\\u0078``. Punctuation and
    whitespace are kept, so JSON stays JSON and a chunking's cut positions stay valid: the redacted
    deltas are the redacted completion cut at the same offsets. None stays None.
    """
    if text is None:
        return None
    kept = set(keep)
    marks = sorted({m for m in markers if m}, key=len, reverse=True)
    out: list[str] = []
    pos = 0
    spans: list[tuple[int, int]] = []
    if marks:
        pattern = re.compile("|".join(re.escape(m) for m in marks))
        spans = [(m.start(), m.end()) for m in pattern.finditer(text)]

    def plain(segment: str, after_marker: bool) -> str:
        def sub(m: re.Match[str]) -> str:
            w = m.group(0)
            if w.startswith("\\u"):
                return "\\u0078"
            if w.startswith("\\"):
                return w
            if w in kept or (w in STRUCTURAL_WORDS and _structural_at(segment, m.start(), m.end(), after_marker)):
                return w
            return _mask(w)

        return _WORD.sub(sub, segment)

    for start, end in spans:
        out.append(plain(text[pos:start], bool(out)))
        out.append(text[start:end])
        pos = end
    out.append(plain(text[pos:], bool(out)))
    return "".join(out)


#: Keys of a tool declaration whose values are free text or example data, masked by :func:`redact_tool`.
TEXT_KEYS = frozenset({"description", "title", "examples", "example", "default", "enum", "const", "pattern"})


def redact_tool(node: Any, keep: Iterable[str] = ()) -> Any:
    """A tool declaration (any JSON value) with the strings under :data:`TEXT_KEYS` masked by
    :func:`redact_text` (names, types, property names and the schema's shape kept)."""
    kept = set(keep)

    def walk(value: Any, masked: bool) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, masked or k in TEXT_KEYS) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, masked) for v in value]
        if isinstance(value, str) and masked:
            return redact_text(value, kept)
        return value

    return walk(node, False)


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def declared_names(tools: Any) -> set[str]:
    """Tool names and every property name of their parameter schemas (recursively), from a request's
    ``tools`` in any route's form: the words :func:`redact_text` keeps."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("name"), str):
                names.add(node["name"])
            props = node.get("properties")
            if isinstance(props, dict):
                names.update(k for k in props if isinstance(k, str))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(tools)
    return names


# ------------------------------------------------------------------------------------- exemplars
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


def _deltas(ex: dict[str, Any], chunking: str, meta: dict[str, Any], markers: tuple[str, ...]) -> tuple[list[str] | None, str | None]:
    """The new side's deltas under ``chunking`` (cut positions as the replay cut them), or a note."""
    from replay.pipeline import AuditConfig, ParserResolver
    from replay.stream import ChunkingError, split

    text = ex["server_output_text"]
    if chunking == "parse":
        return None, "whole-text parse (no deltas)"
    if chunking == "token":
        return None, "token chunking: re-run with the tokenizer to see the deltas"
    opts = meta.get("options", {})
    cut = markers
    try:
        resolver = ParserResolver(  # in-process only: an out-of-process side's own markers are not known here
            AuditConfig(
                parser=opts.get("parser"),
                old_parser=None if opts.get("old_python") else opts.get("old_parser"),
                new_parser=None if opts.get("new_python") else opts.get("new_parser"),
            )
        )
        family = resolver.family(ex.get("model"))
        if family is not None:
            cut = resolver.sides(family).cut_markers("new")
    except Exception:  # a plugin that no longer loads: cut with the family's markers only
        pass
    try:
        return split(text, chunking, markers=cut, steps=ex.get("server_steps")), None
    except ChunkingError as exc:
        return None, f"chunking: {exc}"


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
            deltas, note = _deltas(ex, chunking, meta, markers)
            if deltas is not None and len(deltas) != row["deltas"]:
                note = f"cut again here into {len(deltas)} deltas; the replay fed {row['deltas']} (the side's markers differ)"
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
                    "completion_sha256": _sha(text),
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


def fidelity_sentence(fidelity: pa.Table) -> str:
    """One sentence (Markdown) from the ``fidelity`` query's single row: on how many of the
    compared exchanges the old side's replay did not reproduce what was served, and why; said for
    the terminal under the verdict table and in ``report.md``, where it explains ``unreliable``."""
    f = (fidelity.to_pylist() or [{}])[0]
    if not f.get("exchanges_compared"):
        return "Replay fidelity: no exchange has both a served response and a raw completion; nothing to compare."
    return (
        f"Replay fidelity: the old side's replay did not reproduce what was served on {f['not_reproduced']:,} of "
        f"{f['exchanges_compared']:,} exchanges (calls differ: {f['calls_differ']:,}, content: {f['content_differs']:,}, "
        f"finish_reason: {f['finish_reason_differs']:,}, replay errors: {f['replay_errors']:,}); their stream-check "
        "verdicts are counted in the `unreliable` column only. `replay query fidelity`."
    )


def verdict_markdown(verdicts: pa.Table, fidelity: pa.Table, exemplars: list[Exemplar]) -> str:
    """The section ``report.md`` leads with: the verdict table, the fidelity sentence, and for each
    check with broken or still-wrong exchanges its smallest failing chunking and redacted exemplar."""
    from replay.report import markdown_table

    parts = ["## Verdicts", ""]
    parts.append(
        "Exchanges per check, old against new, each judged against the reference under every chunking "
        "(`fixed`: old wrong, new right; `improved`: both wrong, new under a strict subset of old's failing chunkings "
        "or leaked paths; `broken`: old right, new wrong; `still-wrong`: both wrong alike; "
        "`changed-wrong`: both wrong, differently; `unreliable`: the replay did not reproduce what was served). "
        "Each exchange is in exactly one column, so a row sums to `exchanges`. `streaming-fault`: a side's stream "
        "differs from its own whole-text parse; `semantic-diff`: its whole-text parse differs from the reference's. "
        "Rows `served:...` judge what clients were served (`wrong`). `replay query verdicts`; per exchange: "
        "`replay query verdict_exchanges`."
    )
    parts += ["", markdown_table(verdicts), ""]
    parts.append(fidelity_sentence(fidelity))
    parts.append("")
    for e in exemplars:
        parts += [f"### {e.check}: {e.broken:,} broken, {e.still_wrong:,} still wrong", "", e.markdown, ""]
    return "\n".join(parts)
