"""The report of ``replay matrix``: one table, check by side, in the terminal, ``report.md`` and
``report.html``.

The numbers are the queries ``matrix`` (check by side: exchanges wrong, judged, and against the
baseline fixed and broke), ``matrix_faults`` (each (check, exchange) fault: the first side where it
appears and the side where it goes away) and ``matrix_exemplars`` (the exchanges behind each cell),
run by :func:`replay.matrix.run_matrix` on a connection with the sides set
(:func:`replay.matrix.matrix_connect`). This module only lays them out:

- :func:`matrix_wide`: the ``matrix`` rows as one row per check and one column per side, each
  cell ``WRONG`` on the baseline and ``WRONG (-FIXED +BROKE)`` on another side where either is
  not 0 (:func:`cell_text`); the same table in all three outputs;
- ``report.html``: a self-contained page (no fetch: ``default-src 'none'``) whose matrix cells are
  buttons; a click shows that cell's exemplars (masked unless ``redact`` is False), one panel at
  a time; ``tests/test_report_matrix_html.py`` drives it in headless Chromium.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa

__all__ = ["MatrixReport", "cell_text", "matrix_wide", "faults_display", "matrix_markdown", "matrix_html", "write_matrix_report",
           "LEGEND", "EXEMPLARS_PER_CELL"]

#: What a cell says, after the table (BASELINE is the baseline side's name).
LEGEND = ("Each cell: the exchanges that side gets wrong (under any chunking, judged against the reference); "
          "on a side other than the baseline, (-F +B): F exchanges it fixed and B it broke against the baseline {baseline}.")

#: Exemplars a cell of report.html shows (the first, by exchange id); the cell says how many it has.
EXEMPLARS_PER_CELL = 20

#: Faults listed in the terminal and report.md (report.html lists them all).
FAULTS_SHOWN = 60


@dataclass
class MatrixReport:
    """What :func:`write_matrix_report` wrote: ``path`` (report.md), ``html_path`` (report.html or
    None), ``wide`` (:func:`matrix_wide`) and ``faults`` (:func:`faults_display`), Arrow tables;
    ``render_failures``, the sentences of :func:`render_failure_lines`, and ``ingest``, the ingest
    accounting (:func:`replay.report.markdown.ingest_sentence`; "" without ingest statistics)."""

    path: Path
    html_path: Path | None
    wide: pa.Table
    faults: pa.Table
    render_failures: list[str] = field(default_factory=list)
    ingest: str = ""


def cell_text(wrong: int, fixed: int, broke: int, baseline: bool) -> str:
    """One cell of the matrix: ``"WRONG"``, and ``" (-FIXED +BROKE)"`` after it on a side other
    than the baseline when either is not 0 (counts are exchanges)."""
    if baseline or (not fixed and not broke):
        return f"{wrong:,}"
    return f"{wrong:,} (-{fixed:,} +{broke:,})"


def matrix_wide(matrix: pa.Table, names: Sequence[str], baseline: str) -> pa.Table:
    """The ``matrix`` query's rows (``check, side, wrong, judged, fixed, broke``) as one row per
    check (in the rows' order) and one string column per side in ``names`` order
    (:func:`cell_text`), then ``judged``: the exchanges judged, one number when every side judged
    as many, else ``side: n`` for each."""
    checks: dict[str, dict[str, dict[str, Any]]] = {}
    for row in matrix.to_pylist():
        checks.setdefault(row["check"], {})[row["side"]] = row
    cols: dict[str, list[str]] = {"check": []}
    for name in names:
        cols[name] = []
    cols["judged"] = []
    for check, by_side in checks.items():
        cols["check"].append(check)
        for name in names:
            r = by_side.get(name) or {"wrong": 0, "fixed": 0, "broke": 0}
            cols[name].append(cell_text(r["wrong"], r["fixed"], r["broke"], name == baseline))
        judged = [(by_side.get(n) or {}).get("judged", 0) for n in names]
        cols["judged"].append(f"{judged[0]:,}" if len(set(judged)) == 1 else ", ".join(f"{n}: {j:,}" for n, j in zip(names, judged)))
    return pa.table(cols)


def faults_display(faults: pa.Table) -> pa.Table:
    """The ``matrix_faults`` rows for reading: ``check, exchange, family, appears, goes away,
    wrong on`` (``goes away`` ``–`` when the last side still gets it wrong; ``wrong on`` the sides,
    and ``(returns)`` when it went away and came back)."""
    rows = faults.to_pylist()
    return pa.table({
        "check": [r["check"] for r in rows],
        "exchange": [r["exchange_id"] for r in rows],
        "family": [r["family"] for r in rows],
        "appears": [r["appears"] for r in rows],
        "goes away": [r["goes_away"] for r in rows],
        "wrong on": [", ".join(r["wrong_sides"] or []) + (" (returns)" if r["returns"] else "") for r in rows],
    }, schema=pa.schema([(n, pa.string()) for n in ("check", "exchange", "family", "appears", "goes away", "wrong on")]))


def headline(names: Sequence[str], baseline: str, matrix: pa.Table) -> str:
    """One sentence: the sides, the baseline, and per side the exchanges fixed and broken in all
    (``names``: the sides in order; ``matrix``: the ``matrix`` query's rows). Returns the sentence;
    for one side, that there is nothing to compare it with."""
    per = {n: [0, 0] for n in names}
    for row in matrix.to_pylist():
        if row["side"] in per:
            per[row["side"]][0] += row["fixed"]
            per[row["side"]][1] += row["broke"]
    parts = [f"{n}: {f:,} fixed, {b:,} broken" for n, (f, b) in per.items() if n != baseline]
    if len(names) == 1:  # a matrix of one side: nothing to compare it with
        return f"1 side, {names[0]}: no other side to compare it with."
    return f"{len(names)} sides in order {', '.join(names)}; against the baseline {baseline} ((check, exchange) pairs): " + "; ".join(parts) + "."


def render_failure_lines(con: Any, names: Sequence[str]) -> list[str]:
    """Why sides could not render, one sentence per side that failed (``names`` in order, then the
    reference): the exchanges it failed on and its top three ``renders.error`` texts with a count
    and one exchange each; then, when the reference failed, that those exchanges are judged by no
    side on the render checks (the matrix's ``judged`` column leaves them out). ``con``: the run's
    connection. Returns Markdown sentences (code spans around the reasons); [] when every render
    succeeded. The audit report's "Top render-failure reasons" (replay.report.markdown) is the
    same count over old, new and the reference."""
    from replay.report.markdown import _short

    rows = con.execute(
        "SELECT side, error, count(*) AS n, min(exchange_id) AS example FROM renders WHERE error IS NOT NULL "
        "GROUP BY side, error ORDER BY side, n DESC, error"
    ).fetchall()
    by: dict[str, list[tuple[str, int, str]]] = {}
    for side, error, n, example in rows:
        by.setdefault(side, []).append((error, n, example))
    out = []
    for side in [*names, "reference"]:
        got = by.get(side)
        if not got:
            continue
        total = sum(n for _, n, _ in got)
        out.append(f"Render failures, {side}: {total:,} exchange{'' if total == 1 else 's'}; "
                   + "; ".join(f"`{_short(e)}` ({n:,}, e.g. `{x}`)" for e, n, x in got[:3]) + ".")
    ref = sum(n for _, n, _ in by.get("reference", []))
    if ref:
        out.append(f"{ref:,} exchange{'' if ref == 1 else 's'} the reference could not render: no side is judged on them by "
                   "null-leak, prompt-divergence and render-failure.")
    return out


def matrix_markdown(names: Sequence[str], baseline: str, matrix: pa.Table, faults: pa.Table, meta: dict[str, Any], con: Any) -> str:
    """``report.md`` of a matrix: the headline, the ingest accounting (the audit report's sentence,
    :func:`replay.report.markdown.ingest_sentence`: lines and records, errors by reason, skipped,
    the first error; ``con``, the run's connection, gives that first error), the table
    (:func:`matrix_wide`), the legend, and the first :data:`FAULTS_SHOWN` faults
    (:func:`faults_display`). Returns the Markdown text."""
    from replay.report.markdown import ingest_sentence, markdown_table

    ingest = meta.get("ingest") or {}
    lines = [f"# replay matrix", "", headline(names, baseline, matrix), ""]
    if ingest:
        lines += [ingest_sentence(con, ingest), ""]
    failures = render_failure_lines(con, names)
    if failures:
        lines += [f"- {x}" for x in failures] + [""]
    lines += ["## Check by side", "", markdown_table(matrix_wide(matrix, names, baseline)), "", LEGEND.format(baseline=baseline), ""]
    shown = faults_display(faults)
    lines += ["## Where each fault appears and goes away", ""]
    if shown.num_rows:
        lines.append(markdown_table(shown.slice(0, FAULTS_SHOWN)))
        if shown.num_rows > FAULTS_SHOWN:
            lines.append(f"\nThe first {FAULTS_SHOWN} of {shown.num_rows:,}; `replay query matrix_faults --run RUN` lists them all (report.html too).")
    else:
        lines.append("No side gets any exchange wrong.")
    lines += ["", "`appears`: the first side, in order, that gets the exchange wrong for that check; `goes away`: the first side after the "
              "last wrong one that judges it right (– when the last side still gets it wrong).", ""]
    return "\n".join(lines)


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _masked(rows: list[dict[str, Any]], redact: bool) -> list[dict[str, Any]]:
    """Exemplar rows with the argument text, content and outcome masked (:func:`replay.mask.
    redact_text`, the calls' names and the outcome's keys kept) when ``redact``; a render check's
    outcome (leaked null paths, a prompt's SHA-256: no message text) is kept as it is."""
    if not redact:
        return rows
    from replay.mask import redact_text

    out = []
    for r in rows:
        keep = {c["name"] for c in (r.get("calls") or []) + (r.get("reference_calls") or []) if c.get("name")}
        r = dict(r)
        r["content"] = redact_text(r.get("content"), keep)
        if r.get("smallest_failing_chunking") != "render" or r.get("error") is not None:
            # a stream check's outcome lists calls as {'i': index, 'n': name, 'a': arguments}: its keys kept
            r["outcome"] = redact_text(r.get("outcome"), keep | OUTCOME_KEYS)
        # else a render check's outcome is structure: leaked null paths (tool index and schema keys) or a prompt's SHA-256
        for key in ("calls", "reference_calls"):
            if r.get(key) is not None:
                r[key] = [{"name": c["name"], "arguments": redact_text(c["arguments"], keep)} for c in r[key]]
        out.append(r)
    return out


#: The words of a stream check's outcome kept when masking (replay/checks.py): its keys
#: (``struct_pack(i, n, a)``, ``id``) and the finish reasons it ends with.
OUTCOME_KEYS = frozenset({"i", "n", "a", "id", "tool_calls", "stop", "length", "end_turn", "tool_use"})


def _calls_text(calls: list[dict[str, Any]] | None) -> str:
    if calls is None:
        return "none"
    return "\n".join(f"{c['name']}({c['arguments']})" for c in calls) or "none"


def _exemplar_html(r: dict[str, Any]) -> str:
    failing = r.get("failing_chunkings") or []
    shown = ", ".join(failing[:12]) + (f" and {len(failing) - 12} more" if len(failing) > 12 else "")
    parts = [
        f'<div class="exemplar" data-exchange="{_e(r["exchange_id"])}">',
        f"<h4>{_e(r['exchange_id'])} <span class=note>{_e(r.get('model'))} ({_e(r.get('family'))})</span></h4>",
        f"<p>Fails under {len(failing)} chunkings: {_e(shown)}. Smallest: <code>{_e(r.get('smallest_failing_chunking'))}</code>"
        f" ({_e(r.get('smallest_failing_deltas'))} {'delta' if r.get('smallest_failing_deltas') == 1 else 'deltas'}).</p>",
    ]
    if r.get("error"):
        parts.append(f"<p>Error: <code>{_e(r['error'])}</code></p>")
    if r.get("outcome") is not None:
        parts.append(f"<p>Outcome: <code>{_e(r['outcome'])}</code></p>")
    if r.get("smallest_failing_chunking") != "render":
        parts.append(f"<div class=pair><div><h5>this side, {_e(r.get('smallest_failing_chunking'))}</h5><pre>{_e(_calls_text(r.get('calls')))}</pre></div>"
                     f"<div><h5>reference parse</h5><pre>{_e(_calls_text(r.get('reference_calls')))}</pre></div></div>")
    parts.append("</div>")
    return "".join(parts)


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1f2328;background:#fff}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.bad{background:#ffebe9}td.ok{background:#dafbe1}
td button{font:inherit;border:0;background:none;cursor:pointer;text-decoration:underline;padding:0}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;white-space:pre-wrap;word-break:break-all;border-radius:4px}
.note{color:#57606a}.pair{display:grid;grid-template-columns:1fr 1fr;gap:8px}
.panel{border:1px solid #d0d7de;border-radius:6px;padding:4px 12px;margin:8px 0}
"""

# One panel open at a time: a cell's button shows its panel and hides the others.
_JS = """
(function(){
  document.querySelectorAll('#matrix button[data-panel]').forEach(function(b){
    b.addEventListener('click', function(){
      var id = b.getAttribute('data-panel');
      document.querySelectorAll('section.panel').forEach(function(p){ p.hidden = (p.id !== id); });
      var el = document.getElementById(id); if (el) { el.scrollIntoView(); }
    });
  });
})();
"""


def _panel_id(check: str, side_ord: int) -> str:
    return f"cell-{check.replace(':', '-')}-{side_ord}"


def matrix_html(names: Sequence[str], baseline: str, matrix: pa.Table, faults: pa.Table, exemplars: pa.Table, meta: dict[str, Any],
                run_dir: Path, *, redact: bool = True) -> str:
    """``report.html`` of a matrix (module docstring) as text. The table ``#matrix`` has one row
    per check and a cell per side: ``td[data-check][data-side]`` with ``data-wrong``,
    ``data-fixed``, ``data-broke`` and ``data-judged``; a cell with wrong exchanges holds a button
    whose click shows ``section.panel#cell-CHECK-N`` (N: the side's place, from 1) listing its
    first :data:`EXEMPLARS_PER_CELL` exemplars (``div.exemplar[data-exchange]``). ``redact``:
    mask argument text, content and outcomes (:func:`replay.mask.redact_text`)."""
    by_cell: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in _masked(exemplars.to_pylist(), redact):
        by_cell.setdefault((r["check"], r["side"]), []).append(r)
    checks: dict[str, dict[str, dict[str, Any]]] = {}
    for row in matrix.to_pylist():
        checks.setdefault(row["check"], {})[row["side"]] = row
    head = "<tr><th>check</th>" + "".join(f"<th data-side=\"{_e(n)}\">{_e(n)}{' (baseline)' if n == baseline else ''}</th>" for n in names) + "</tr>"
    body, panels = [], []
    for check, by_side in checks.items():
        cells = [f"<th>{_e(check)}</th>"]
        for i, name in enumerate(names, 1):
            r = by_side.get(name) or {"wrong": 0, "fixed": 0, "broke": 0, "judged": 0}
            text = cell_text(r["wrong"], r["fixed"], r["broke"], name == baseline)
            attrs = (f'data-check="{_e(check)}" data-side="{_e(name)}" data-wrong="{r["wrong"]}" data-fixed="{r["fixed"]}" '
                     f'data-broke="{r["broke"]}" data-judged="{r["judged"]}" title="{r["judged"]:,} exchanges judged"')
            cls = "num bad" if r["wrong"] else "num ok"
            if r["wrong"]:
                pid = _panel_id(check, i)
                cells.append(f'<td class="{cls}" {attrs}><button type=button data-panel="{pid}">{_e(text)}</button></td>')
                rows = by_cell.get((check, name), [])
                more = f" The first {EXEMPLARS_PER_CELL} of {len(rows):,}." if len(rows) > EXEMPLARS_PER_CELL else ""
                panels.append(
                    f'<section class=panel id="{pid}" data-check="{_e(check)}" data-side="{_e(name)}" hidden>'
                    f"<h3>{_e(check)} on {_e(name)}: {r['wrong']:,} exchanges wrong</h3><p class=note>{_e(more)}</p>"
                    + "".join(_exemplar_html(x) for x in rows[:EXEMPLARS_PER_CELL]) + "</section>"
                )
            else:
                cells.append(f'<td class="{cls}" {attrs}>{_e(text)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    fd = faults_display(faults)
    cols = fd.column_names
    frows = "".join("<tr>" + "".join(f"<td>{_e(v if v is not None else '–')}</td>" for v in row.values()) + "</tr>" for row in fd.to_pylist())
    fault_table = (f'<table id="faults"><tr>{"".join(f"<th>{_e(c)}</th>" for c in cols)}</tr>{frows}</table>'
                   if fd.num_rows else "<p>No side gets any exchange wrong.</p>")
    data = json.dumps({"sides": list(names), "baseline": baseline}, ensure_ascii=False).replace("</", "<\\/")
    csp = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"
    title = f"replay matrix: {Path(run_dir).name}"
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        f'<meta name=viewport content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body><main><h1>{_e(title)}</h1>"
        f"<p>{_e(headline(names, baseline, matrix))}</p>"
        "<h2>Check by side</h2>"
        f'<table id="matrix">{head}{"".join(body)}</table>'
        f"<p class=note>{_e(LEGEND.format(baseline=baseline))} Click a cell for its exchanges. <code>replay query matrix</code>.</p>"
        + "".join(panels)
        + "<h2>Where each fault appears and goes away</h2>" + fault_table
        + '<script type="application/json" id="matrix-data">' + data + "</script>"
        + f"<script>{_JS}</script></main></body></html>\n"
    )


def write_matrix_report(run_dir: Path, con: Any, names: Sequence[str], baseline: str, matrix: pa.Table, faults: pa.Table,
                        meta: dict[str, Any], *, redact: bool = True, html: bool = True) -> MatrixReport:
    """Write ``run_dir/report.md`` and (``html``) ``report.html`` of a matrix; ``con``: the run's
    connection with the sides set (:func:`replay.matrix.matrix_connect`), read for the exemplars
    (query ``matrix_exemplars``). Returns a :class:`MatrixReport`. Raises OSError when a file
    cannot be written, :class:`replay.sql.QueryError` when the query fails."""
    from replay.sql import run_query

    run_dir = Path(run_dir)
    md = run_dir / "report.md"
    md.write_text(matrix_markdown(names, baseline, matrix, faults, meta, con), encoding="utf-8")
    html_path = None
    if html:
        exemplars = run_query(con, "matrix_exemplars")
        html_path = run_dir / "report.html"
        html_path.write_text(matrix_html(names, baseline, matrix, faults, exemplars, meta, run_dir, redact=redact), encoding="utf-8")
    from replay.report.markdown import ingest_sentence

    ingest = ingest_sentence(con, meta["ingest"]) if meta.get("ingest") else ""
    return MatrixReport(md, html_path, matrix_wide(matrix, names, baseline), faults_display(faults), render_failure_lines(con, names), ingest)
