"""``RUN/report.html``: the run as one page to link from a pull request, self-contained and offline.

The page holds the verdict table (the numbers of ``replay query verdicts``, read by its columns,
whatever they are), the headline sentences, charts of the faults per check and per parser family,
the extra prompt tokens per request (old against new) as a histogram, the leaked nulls by field,
the served-side faults by capture format and route, the ingest errors, the exemplars with the
difference between expected and got highlighted, and the run's options. Everything is inline:
styles, data and scripts; a Content-Security-Policy of ``default-src 'none'`` makes the browser
refuse any fetch, so the page works from a CI artifact, a mail attachment or a laptop offline.

Charts: Vega-Lite specs built with altair (the Vega project's Python API) and drawn in the
browser by vega-embed, with Vega and Vega-Lite, from the one script ``vl-convert-python`` bundles
(``vl_convert.javascript_bundle``, the same bundle altair's ``inline`` HTML uses, dependencies
included, nothing from a CDN). Why this and not plotly: the script is 898 KB against plotly's
``plotly.min.js`` of 4.8 MB (plotly 6 wheel), so a page with its data stays under 1 MB; and the
charts stay Vega-Lite specs a reader can open in the Vega editor. (vl-convert 1.9's bundle of
Vega alone, 577 KB, cannot be used: it exports ``window.vega`` as null; compiling Vega-Lite in
Python would also cost an engine's start-up per process.) Building the bundle is slow, so it is
cached per vl-convert version under ``$XDG_CACHE_HOME/replay`` (``~/.cache/replay``).
"""

from __future__ import annotations

import difflib
import html
import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa

from replay.sql import run_query, run_sql

__all__ = ["write_html_report", "html_report", "html_queries", "vega_runtime", "VL_VERSION"]

#: The Vega-Lite version the specs are compiled with (altair 6 writes v6 specs).
VL_VERSION = "6.4"

_RUNTIME: str | None = None


def vega_runtime() -> str:
    """vega-embed with Vega and Vega-Lite as one script (``window.vegaEmbed``), from
    ``vl_convert.javascript_bundle``; cached in memory and on disk (see the module docstring).
    Raises ImportError without ``vl-convert-python``."""
    global _RUNTIME
    if _RUNTIME is not None:
        return _RUNTIME
    import vl_convert

    version = getattr(vl_convert, "__version__", "0")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "replay" / f"vega-embed-{version}-vl{VL_VERSION}.js"
    try:
        _RUNTIME = cache.read_text(encoding="utf-8")
        return _RUNTIME
    except OSError:
        pass
    _RUNTIME = vl_convert.javascript_bundle(vl_version=VL_VERSION)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_RUNTIME, encoding="utf-8")
        os.replace(tmp, cache)
    except OSError:  # a read-only home: build it again next time
        pass
    return _RUNTIME


def _compile(chart: Any) -> dict[str, Any]:
    """The Vega-Lite spec of an altair chart, as JSON values (validated against the schema by altair)."""
    return chart.to_dict()


# ------------------------------------------------------------------------------------- charts
def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.to_pylist()


def _numeric(table: pa.Table, col: str) -> bool:
    t = table.schema.field(col).type
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def _bars(rows: list[dict[str, Any]], *, y: str, x: str, color: str, title: str, x_title: str) -> Any:
    """Horizontal stacked bars: one bar per ``y`` value, ``x`` summed, split by ``color``."""
    import altair as alt

    n = len({r[y] for r in rows})
    return (
        alt.Chart(alt.Data(values=rows), title=title)
        .mark_bar()
        .encode(
            y=alt.Y(f"{y}:N", title=None, sort=None),
            x=alt.X(f"sum({x}):Q", title=x_title),
            color=alt.Color(f"{color}:N", title=None, sort=None),
            tooltip=[alt.Tooltip(f"{y}:N"), alt.Tooltip(f"{color}:N"), alt.Tooltip(f"sum({x}):Q", title=x_title)],
        )
        .properties(width=520, height=max(60, 22 * n))
    )


def verdict_chart(verdicts: pa.Table) -> tuple[Any | None, str]:
    """Faults per check: every count column of the verdict table except ``same-ok`` and the
    ``exchanges`` total, stacked per check; None when no check has one."""
    cols = [c for c in verdicts.column_names if c not in ("check", "same-ok", "exchanges") and _numeric(verdicts, c)]
    rows = [{"check": r["check"], "verdict": c, "n": r[c]} for r in _rows(verdicts) for c in cols if r[c]]
    if not rows:
        return None, "No check has a fixed, broken, wrong or unreliable exchange."
    return _bars(rows, y="check", x="n", color="verdict", title="Faults per check (exchanges, by verdict)", x_title="exchanges"), ""


def family_chart(faults: pa.Table) -> tuple[Any | None, str]:
    """Stream-check faults per parser family: exchanges × stream checks each side gets wrong, old
    and new side by side. ``faults``: the ``faults_by_family`` query's rows. Render checks
    (:data:`replay.verdicts.CHECK_TABLE` ``renders``) are left out: they do not depend on the
    tool parser, and the exchanges without a raw completion, which have only those, made a
    ``(not re-streamed)`` "family" bar (they are in the per-check chart)."""
    from replay.verdicts import CHECK_TABLE

    rows = []
    for r in _rows(faults):
        if CHECK_TABLE.get(r["check"]) != "streams":
            continue
        for side in ("old", "new"):
            if r[f"{side}_wrong"]:
                rows.append({"family": r["family"], "side": side, "check": r["check"], "n": r[f"{side}_wrong"]})
    if not rows:
        if not any(CHECK_TABLE.get(r["check"]) == "streams" for r in _rows(faults)):
            return None, "No exchange was re-streamed (no raw completion): the stream checks judged nothing."
        return None, "No side gets any re-streamed exchange wrong on a stream check."
    import altair as alt

    n = len({r["family"] for r in rows})
    chart = (
        alt.Chart(alt.Data(values=rows), title="Stream-check faults per parser family (exchange × check, by side)")
        .mark_bar()
        .encode(
            y=alt.Y("family:N", title=None),
            yOffset=alt.YOffset("side:N", sort=["old", "new"]),
            x=alt.X("sum(n):Q", title="faults (exchange × check)"),
            color=alt.Color("side:N", sort=["old", "new"], title=None),
            tooltip=["family:N", "side:N", "check:N", alt.Tooltip("sum(n):Q", title="faults")],
        )
        .properties(width=520, height=max(60, 40 * n))
    )
    return chart, ""


def extra_tokens_chart(hist: pa.Table) -> tuple[Any | None, str]:
    """Histogram of the old side's extra prompt tokens per request over the new side's (chars
    when the run has no token counts). ``hist``: the ``extra_prompt_tokens_histogram`` query's
    rows (``unit``, ``bin_start``, ``bin_end``, ``requests``: at most 30 bins, binned by DuckDB),
    so the page and altair's validation hold one row per bin, not one per exchange."""
    rows = _rows(hist)
    if not rows:
        return None, "No exchange was rendered by both sides."
    import altair as alt

    unit = rows[0]["unit"]
    note = "" if unit == "tokens" else " (chars: no --tokenizer)"
    values = [{"start": r["bin_start"], "end": r["bin_end"], "requests": r["requests"]} for r in rows]
    chart = (
        alt.Chart(alt.Data(values=values), title=f"Extra prompt {unit} per request, old − new{note}")
        .mark_bar()
        .encode(
            x=alt.X("start:Q", bin="binned", title=f"old − new prompt {unit}"),
            x2="end:Q",
            y=alt.Y("requests:Q", title="requests"),
            tooltip=[alt.Tooltip("start:Q", title=f"{unit} from"), alt.Tooltip("end:Q", title="to (excl.)"), alt.Tooltip("requests:Q")],
        )
        .properties(width=520, height=180)
    )
    return chart, ""


def null_chart(leaks: pa.Table, schemas_judged: bool = True) -> tuple[Any | None, str]:
    """Leaked nulls by field (tool schemas), one bar per side. ``schemas_judged``: whether any side
    serialized a tool schema (without one, the note says nothing was judged rather than "no leak")."""
    rows = [{"field": r["field"], "side": r["side"], "n": r["schemas_leaking"]} for r in _rows(leaks) if r["schemas_leaking"]]
    if not rows:
        if not schemas_judged:
            return None, "No tool schema was serialized: the null-leak counts judged nothing."
        return None, "No side leaked a null."
    return _bars(rows, y="field", x="n", color="side", title="Leaked nulls by field (tool schemas)", x_title="tool schemas"), ""


def served_chart(served: pa.Table) -> tuple[Any | None, str]:
    """Served-side faults (the count columns after ``calls`` of the served_checks query) per
    capture format and route."""
    cols = served.column_names
    counts = cols[cols.index("calls") + 1 :] if "calls" in cols else []
    rows = [
        {"where": f"{r['capture_format']} / {r['route']}", "fault": c, "n": r[c]}
        for r in _rows(served) for c in counts if _numeric(served, c) and r[c]
    ]
    if not rows:
        if not any(r.get("served") for r in _rows(served)):
            return None, "No exchange has a captured response or stream: nothing served to judge."
        return None, "Nothing clients received has a fault."
    return _bars(rows, y="where", x="n", color="fault", title="Served-side faults by capture format / route", x_title="count"), ""


def errors_chart(errors: pa.Table) -> tuple[Any | None, str]:
    """Ingest errors by reason."""
    rows = [{"reason": r["reason"], "n": r["n"], "kind": "lines"} for r in _rows(errors)]
    if not rows:
        return None, "Every line became an exchange."
    return _bars(rows, y="reason", x="n", color="kind", title="Ingest errors by reason", x_title="lines"), ""


# ------------------------------------------------------------------------------------- page
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1f2328;background:#fff}
main{max-width:1000px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.hot{background:#ffebe9;font-weight:600}td.good{background:#dafbe1}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;white-space:pre-wrap;word-break:break-all;border-radius:4px}
del{background:#ffebe9;color:#82071e;text-decoration:line-through}ins{background:#dafbe1;color:#116329;text-decoration:none}
.note{color:#57606a}.chart{margin:8px 0 18px}.grid{display:block}
ul.lines li{margin:2px 0}
"""

# Draw every chart; errors go to the console (the test reads it) and into the chart's box.
_DRAW = """
(function(){
  const specs = JSON.parse(document.getElementById('vega-specs').textContent);
  const runs = Object.keys(specs).map(function(id){
    const el = document.getElementById(id);
    return vegaEmbed(el, specs[id], {renderer: 'svg', actions: false, mode: 'vega-lite'})
      .then(function(){ el.setAttribute('data-drawn', '1'); })
      .catch(function(e){ console.error('chart ' + id + ': ' + e); el.textContent = 'chart failed: ' + e; });
  });
  window.replayChartsDrawn = Promise.all(runs);
})();
"""


def _e(text: Any) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def _fmt(value: Any) -> str:
    from replay.report.markdown import _fmt as fmt

    return fmt(value)


def _inline_md(text: str) -> str:
    """A headline sentence (Markdown with `code` spans) as HTML."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(f"<code>{_e(p[1:-1])}</code>" if p.startswith("`") and p.endswith("`") and len(p) > 1 else _e(p) for p in parts)


def html_table(table: pa.Table, *, table_id: str | None = None, hot: Iterable[str] = ()) -> str:
    """An Arrow table as an HTML table; each cell carries ``data-col`` (and each row the first
    column's value as ``data-key``), numbers right-aligned; non-zero cells of ``hot`` columns marked."""
    cols = table.column_names
    hot = set(hot)
    out = [f'<table{f" id={chr(34)}{table_id}{chr(34)}" if table_id else ""}><thead><tr>']
    out += [f"<th>{_e(c)}</th>" for c in cols]
    out.append("</tr></thead><tbody>")
    for row in table.to_pylist():
        key = row[cols[0]] if cols else ""
        out.append(f'<tr data-key="{_e(key)}">')
        for c in cols:
            v = row[c]
            cls = "num" if _numeric(table, c) else ""
            if c in hot and v:
                cls += " hot"
            out.append(f'<td class="{cls.strip()}" data-col="{_e(c)}">{_e(_fmt(v))}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


#: Chars of each text's differing middle (after their common prefix and suffix) that
#: :func:`highlight_diff` compares char by char; a longer middle is marked whole.
DIFF_CHARS = 2_000


def highlight_diff(expected: str, got: str) -> tuple[str, str]:
    """Both texts as HTML with what differs marked: ``<del>`` in ``expected`` for what ``got``
    lacks, ``<ins>`` in ``got`` for what it adds. The common prefix and suffix are kept as they
    are; the middles are compared by ``difflib.SequenceMatcher`` (characters) when neither is
    longer than :data:`DIFF_CHARS`, else each is marked whole: SequenceMatcher's time grows with
    the product of the lengths, so the page's time stays bounded by what it shows."""
    n = min(len(expected), len(got))
    pre = 0
    while pre < n and expected[pre] == got[pre]:
        pre += 1
    suf = 0
    while suf < n - pre and expected[-1 - suf] == got[-1 - suf]:
        suf += 1
    a_mid, b_mid = expected[pre : len(expected) - suf], got[pre : len(got) - suf]
    a, b = [_e(expected[:pre])], [_e(got[:pre])]
    if len(a_mid) > DIFF_CHARS or len(b_mid) > DIFF_CHARS:
        ops = [("replace", 0, len(a_mid), 0, len(b_mid))]
    else:
        ops = difflib.SequenceMatcher(None, a_mid, b_mid, autojunk=False).get_opcodes()
    for op, i1, i2, j1, j2 in ops:
        if op == "equal":
            a.append(_e(a_mid[i1:i2]))
            b.append(_e(b_mid[j1:j2]))
            continue
        if i2 > i1:
            a.append(f"<del>{_e(a_mid[i1:i2])}</del>")
        if j2 > j1:
            b.append(f"<ins>{_e(b_mid[j1:j2])}</ins>")
    tail = len(expected) - suf
    a.append(_e(expected[tail:]))
    b.append(_e(got[len(got) - suf :]))
    return "".join(a), "".join(b)


def _outcome_text(side: dict[str, Any] | None) -> str:
    if not side:
        return "(none)"
    listed = side.get("calls") or []
    calls = "\n".join(f"  {c['index']}: {c['name']}({c['arguments']})" for c in listed) or "  (no call)"
    more = (side.get("calls_total") or len(listed)) - len(listed)
    if more > 0:  # the exemplar lists MAX_CALLS calls; its cut said here
        calls += f"\n  … {more:,} more calls"
    lines = [f"calls:\n{calls}", f"finish_reason: {side.get('finish_reason')}", f"content: {json.dumps(side.get('content'), ensure_ascii=False)}"]
    if side.get("error"):
        lines.append(f"error: {side['error']}")
    return "\n".join(lines)


def _render_side(doc: dict[str, Any], side: str) -> str:
    r = doc.get(side) or {}
    return (
        f"serializer: {r.get('serializer')}\nleaked nulls: {', '.join(r.get('leaked_nulls') or []) or 'none'}\n"
        f"prompt sha256: {(r.get('prompt_sha256') or '-')[:16]}  chars: {r.get('prompt_chars')}\nerror: {r.get('error')}"
    )


def exemplar_html(doc: dict[str, Any]) -> str:
    """One exemplar (``RUN/exemplars/<check>.json``) with the expected and the got highlighted."""
    head = (
        f"<h3>{_e(doc.get('check'))}: exchange <code>{_e(doc.get('exchange_id'))}</code> ({_e(doc.get('verdict'))})</h3>"
        f"<p class=note>model <code>{_e(doc.get('model'))}</code>, chunking <code>{_e(doc.get('chunking'))}</code>, "
        f"{_e(doc.get('deltas'))} deltas; tools {', '.join(f'<code>{_e(n)}</code>' for n in doc.get('tool_names') or []) or 'none'}"
        f"{'; message text masked' if doc.get('redacted') else ''}. <code>replay show {_e(doc.get('exchange_id'))} --run RUN</code></p>"
    )
    if doc.get("chunking") == "render":
        old, ref = highlight_diff(_render_side(doc, "reference"), _render_side(doc, "new"))
        old_side, _ = highlight_diff(_render_side(doc, "old"), _render_side(doc, "new"))
        return head + (
            f"<table class=diff><tr><th>reference</th><th>new</th></tr><tr><td><pre>{old}</pre></td><td><pre>{ref}</pre></td></tr>"
            f"<tr><th colspan=2>old</th></tr><tr><td colspan=2><pre>{old_side}</pre></td></tr></table>"
        )
    exp, got = highlight_diff(_outcome_text(doc.get("expected")), _outcome_text(doc.get("got_new")))
    deltas = doc.get("delta_texts")
    from replay.report.exemplars import deltas_shown

    shown = deltas_shown(deltas, doc.get("deltas"), str(doc.get("exchange_id"))) if deltas is not None else (doc.get("deltas_note") or "")
    return head + (
        f"<table class=diff><tr><th>expected (reference whole-text parse)</th><th>new side</th></tr>"
        f"<tr><td><pre>{exp}</pre></td><td><pre>{got}</pre></td></tr></table>"
        f"<p class=note>old side:</p><pre>{_e(_outcome_text(doc.get('got_old')))}</pre>"
        f"<p class=note>deltas:</p><pre>{_e(shown)}</pre>"
    )


def html_queries(con: Any) -> dict[str, pa.Table]:
    """The page's own query results, beyond the report queries', as Arrow tables: ``judged`` (one
    row, ``n``: renders + streams rows), ``faults_by_family``, ``extra_prompt_tokens_histogram``,
    ``errors_by_reason`` and ``first_errors`` (the first 50 ingest errors). ``con``: a connection
    from :func:`replay.sql.connect`. Run before the page is built, so that the connection can be
    closed first: altair's import then never adds to DuckDB's memory at its limit.
    Raises :class:`replay.sql.QueryError` as :func:`replay.sql.run_sql` does."""
    return {
        "judged": run_sql(con, "SELECT (SELECT count(*) FROM renders) + (SELECT count(*) FROM streams) AS n"),
        "faults_by_family": run_query(con, "faults_by_family"),
        "extra_prompt_tokens_histogram": run_query(con, "extra_prompt_tokens_histogram"),
        "errors_by_reason": run_sql(con, "SELECT reason, count(*) AS n FROM ingest_errors GROUP BY reason ORDER BY n DESC, reason"),
        "first_errors": run_sql(
            con,
            "SELECT source_file || ':' || coalesce(source_line::VARCHAR, '?') AS line, reason, detail "
            "FROM ingest_errors ORDER BY source_file, source_line LIMIT 50",
        ),
    }


def html_report(
    con: Any, meta: dict[str, Any], results: dict[str, pa.Table], lines: list[str], exemplars: list[Any], run_dir: Path,
    data: dict[str, pa.Table] | None = None,
) -> str:
    """The whole page as text. ``con``: a connection from :func:`replay.sql.connect` (unused when
    ``data`` is given; may then be None); ``meta``: ``run.json``; ``results``: the report queries'
    results (:func:`replay.report.run_report_queries`); ``lines``: the headline sentences;
    ``exemplars``: :class:`replay.report.exemplars.Exemplar` list; ``data``: the page's own query
    results (:func:`html_queries`; None: run now on ``con``)."""
    from replay.report.markdown import fidelity_sentence

    if data is None:
        data = html_queries(con)

    specs: dict[str, Any] = {}
    sections: list[str] = []

    def chart(cid: str, made: tuple[Any | None, str]) -> str:
        spec, note = made
        if spec is None:
            return f'<p class="note" data-no-chart="{cid}">{_e(note)}</p>'
        specs[cid] = _compile(spec)
        return f'<div class="chart" id="{cid}"></div>'

    verdicts = results["verdicts"]
    judged = data["judged"].column("n")[0].as_py()
    sections.append("<h2>Verdicts</h2>")
    if judged:
        sections.append(
            "<p class=note>Exchanges per check, old against new, each judged against the reference under every chunking. "
            "<code>replay query verdicts</code>.</p>"
        )
        hot = [c for c in verdicts.column_names if c not in ("check", "same-ok", "exchanges", "fixed")]
        sections.append(html_table(verdicts, table_id="verdicts", hot=hot))
        sections.append(f"<p>{_inline_md(fidelity_sentence(results['fidelity']))}</p>")
    else:
        sections.append("<p>Not judged: this run was not rendered or re-streamed (run <code>replay render</code> and <code>replay stream</code>, or <code>replay audit</code>).</p>")
    if lines:
        sections.append("<ul class=lines>" + "".join(f"<li>{_inline_md(s)}</li>" for s in lines) + "</ul>")

    mismatch = results.get("family_mismatch")
    if mismatch is not None and mismatch.num_rows:
        sections.append("<h2>Completions of another tool-parser family</h2>")
        sections.append(
            "<p class=note>Exchanges whose completions hold another family's call markers than the family picked for them "
            "(judged with the wrong parser). <code>replay query family_mismatch</code>.</p>"
        )
        sections.append(html_table(mismatch, table_id="family-mismatch"))
    sections.append("<h2>Faults</h2>")
    sections.append(chart("chart-checks", verdict_chart(verdicts)))
    sections.append(chart("chart-families", family_chart(data["faults_by_family"])))
    sections.append("<h2>Prompts</h2>")
    sections.append(chart("chart-extra-tokens", extra_tokens_chart(data["extra_prompt_tokens_histogram"])))
    judged_schemas = any(r.get("schemas_with_leaked_null") is not None for r in results["summary"].to_pylist())
    sections.append(chart("chart-nulls", null_chart(results["null_leaks"], judged_schemas)))
    sections.append(html_table(results["null_leaks"]) if results["null_leaks"].num_rows else "")
    sections.append(html_table(results["divergent_prompts"]) if results["divergent_prompts"].num_rows else "")

    sections.append("<h2>What clients received</h2>")
    sections.append(chart("chart-served", served_chart(results["served_checks"])))
    if results["served_checks"].num_rows:
        sections.append(html_table(results["served_checks"]))

    sections.append("<h2>Ingest errors</h2>")
    by_reason = data["errors_by_reason"]
    sections.append(chart("chart-errors", errors_chart(by_reason)))
    first = data["first_errors"]
    if first.num_rows:
        sections.append(html_table(first) + "<p class=note>The first 50; <code>replay query ingest_errors --run RUN</code> lists them all, by file and line.</p>")

    sections.append("<h2>Exemplars</h2>")
    docs = []
    for ex in exemplars:
        try:
            docs.append(json.loads(Path(ex.path).read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    if docs:
        sections.extend(f'<div class="exemplar" data-check="{_e(d.get("check"))}">{exemplar_html(d)}</div>' for d in docs)
    else:
        sections.append("<p class=note>No check has a broken or still-wrong exchange.</p>")

    sections.append("<h2>Run</h2>")
    sections.append(_options_html(meta, run_dir))

    runtime = vega_runtime().replace("</script", "<\\/script") if specs else ""
    spec_json = json.dumps(specs, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    csp = "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:"
    title = f"replay audit: {Path(run_dir).name}"
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        f'<meta name=viewport content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body><main><h1>{_e(title)}</h1>"
        f"<p class=note>replay {_e(meta.get('versions', {}).get('replay', ''))}; {len(meta.get('inputs', []))} input files. "
        "The same numbers as <code>report.md</code> and <code>replay query</code>.</p>"
        + "".join(sections)
        + f'</main><script type="application/json" id="vega-specs">{spec_json}</script>'
        + (f"<script>{runtime}</script><script>{_DRAW}</script>" if specs else "")
        + "</body></html>\n"
    )


def _options_html(meta: dict[str, Any], run_dir: Path) -> str:
    out = []
    if (meta.get("filters") or {}).get("sentence"):
        out.append(f"<p>Filters: {_e(meta['filters']['sentence'])}.</p>")
    opts = meta.get("options") or {}
    rows = "".join(
        f"<tr><th>{_e(k)}</th><td><code>{_e(json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v)}</code></td></tr>"
        for k, v in opts.items()
    )
    out.append(f'<table id="options">{rows}</table>')
    inputs = meta.get("inputs") or []
    if inputs:
        shown = inputs[:20]
        out.append(
            "<p class=note>Inputs:</p><table>"
            + "".join(f"<tr><td><code>{_e(i.get('path'))}</code></td><td class=num>{_e(_fmt(i.get('bytes')))} bytes</td></tr>" for i in shown)
            + "</table>"
            + (f"<p class=note>and {len(inputs) - len(shown):,} more (run.json).</p>" if len(inputs) > len(shown) else "")
        )
    versions = meta.get("versions") or {}
    if versions:
        out.append("<p class=note>Versions: " + ", ".join(f"{_e(k)} {_e(v)}" for k, v in versions.items()) + ".</p>")
    if meta.get("seconds"):
        out.append("<p class=note>Seconds per stage: " + ", ".join(f"{_e(k)} {float(v):.2f}" for k, v in meta["seconds"].items()) + ".</p>")
    return "".join(out)


def write_html_report(
    con: Any, run_dir: Path, meta: dict[str, Any], results: dict[str, pa.Table], lines: list[str], exemplars: list[Any],
    data: dict[str, pa.Table] | None = None,
) -> Path:
    """Write ``RUN/report.html`` (see :func:`html_report`; ``data``: :func:`html_queries`' results,
    None to run them on ``con``) and return its path."""
    path = Path(run_dir) / "report.html"
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(html_report(con, meta, results, lines, exemplars, Path(run_dir), data), encoding="utf-8")
    os.replace(tmp, path)
    return path
