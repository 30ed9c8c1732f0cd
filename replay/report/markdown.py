"""What a run says: a rich summary table for the terminal and ``report.md`` for a pull request.

The numbers all come from the shipped queries (:mod:`replay.sql`); this module only words them.
Sentences name the sides by their serializer or parser so a reader of the PR knows what was compared
("24 of 24 tool schemas carried a null the client never sent with `model-dump`; 0 with
`client-fields`").
"""

from __future__ import annotations

import re

from typing import Any, Iterable

import pyarrow as pa

from replay import checks
from replay.capture.records import lines_and_records
from replay.sql import get_query, run_query, run_sql, scalar
from replay.term import FitTable


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def rich_table(table: pa.Table, title: str | None = None) -> FitTable:
    """An Arrow table for the terminal (:class:`replay.term.FitTable`: fits the console's width,
    never cuts a value, stacks one block per row when the columns cannot fit): numbers
    right-aligned with thousands separators, nulls as –. Title, headers and cells go through
    :func:`replay.term.visible` (control characters made visible) and are never rich markup."""
    numeric = [_numeric(table, name) for name in table.column_names]
    rows = ([_fmt(v) for v in row.values()] for row in table.to_pylist())
    return FitTable(table.column_names, rows, numeric=numeric, title=title)


def markdown_table(table: pa.Table) -> str:
    """An Arrow table as a GitHub Markdown table (``|`` in cells and column names escaped)."""
    cols = table.column_names
    lines = ["| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cols) + " |", "|" + "|".join("---:" if _numeric(table, c) else "---" for c in cols) + "|"]
    for row in table.to_pylist():
        lines.append("| " + " | ".join(_fmt(row[c]).replace("|", "\\|").replace("\n", " ") for c in cols) + " |")
    return "\n".join(lines)


def _numeric(table: pa.Table, col: str) -> bool:
    t = table.schema.field(col).type
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def summary_by_side(table: pa.Table) -> pa.Table:
    """The ``summary`` query transposed for reading: one row per count, one column per side."""
    rows = table.to_pylist()
    sides = [r["side"] for r in rows]
    counts = [c for c in table.column_names if c != "side"]
    cols: dict[str, list[Any]] = {"count": counts}
    for side, r in zip(sides, rows):
        cols[side] = [r[c] for c in counts]
    return pa.table(cols, schema=pa.schema([("count", pa.string())] + [(s, pa.int64()) for s in sides]))


def _n(count: int | None, noun: str) -> str:
    """``"1 call"``, ``"3 calls"``, with thousands separators."""
    count = count or 0
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _measured(row: dict[str, Any], items: Iterable[tuple[str, Any, str]]) -> list[str]:
    """Clauses of a headline from a ``summary`` row: for each ``(column, template, unmeasured)``,
    ``template.format(count)`` (or ``template(count)`` for a function) when the count is a number,
    else ``unmeasured``. The ``summary``
    query gives null where nothing was judged (no call, no served response): such a count is said
    to be not measured, never written as 0 (issue #20)."""
    return [
        unmeasured if row.get(col) is None else template(row[col]) if callable(template) else template.format(row[col])
        for col, template, unmeasured in items
    ]


def _parsers_label(names: str | None) -> str:
    """``parser `hermes``` for one family, ``3 parser families: `a`, `b`, `c``` for a few, a count for many."""
    items = [n for n in (names or "").split(", ") if n]
    if len(items) == 1:
        return f"parser `{items[0]}`"
    if len(items) <= 4:
        return f"{len(items)} parser families: " + ", ".join(f"`{n}`" for n in items)
    return f"{len(items)} parser families"


def _first_error(con: Any) -> str:
    """``file:line reason (detail)`` of the first ingest error, for the headline."""
    got = con.execute(
        "SELECT source_file, source_line, reason, detail FROM ingest_errors ORDER BY source_file, source_line LIMIT 1"
    ).fetchall()
    if not got:
        return ""
    f, line, reason, detail = got[0]
    return f"`{_short(f'{f}:{line} {reason}: {detail}', 200)}`"


def _short(text: str | None, limit: int = 160) -> str:
    """One line of at most ``limit`` chars, backticks removed (it goes inside a code span)."""
    text = " ".join((text or "").split()).replace("`", "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _by(rows: Iterable[dict[str, Any]], key: str) -> dict[Any, dict[str, Any]]:
    return {r[key]: r for r in rows}


REPORT_QUERIES = (
    "verdicts", "fidelity", "smallest_failures",
    "summary", "null_leaks", "divergent_prompts", "dropped_calls", "non_json_joins", "served_checks", "capture_formats",
    "render_failures", "family_mismatch",
)


def run_report_queries(con: Any) -> dict[str, pa.Table]:
    """Each query the report shows, run once: ``{name: Arrow table}``. On a large run a query
    scans every table, so the terminal summary, the headlines and ``report.md`` share these.
    The view ``verdicts_by_exchange`` (which ``verdicts`` and ``smallest_failures`` read; it
    groups ``verdict_pairs``) is computed once per connection (:func:`replay.sql.materialize`)."""
    return {name: run_query(con, name) for name in REPORT_QUERIES}


def render_failure_lines(fails: dict[str, int], reasons: pa.Table | None, con: Any) -> list[str]:
    """The render-failure headlines: the count per side, then per side its top reasons (query
    ``render_failures``: count and one exchange id each), the exchanges the render checks could
    not judge because the reference failed (view ``render_not_judged``), and those null-leak and
    prompt-divergence could not judge because old or new failed (view ``not_judged``)."""
    out = [
        f"Render failures: {fails['old']:,} on the old side, {fails['new']:,} on the new side, {fails['reference']:,} on the "
        "reference; the counts above leave them out (`replay query render_failures`, all in `renders.error`)."
    ]
    rows = reasons.to_pylist() if reasons is not None else []
    for side in ("old", "new", "reference"):
        top = [r for r in rows if r["side"] == side][:3]
        if top:
            out.append(
                f"Top render-failure reasons, {side}: "
                + "; ".join(f"`{_short(r['reason'])}` ({r['exchanges']:,}, e.g. `{r['example']}`)" for r in top) + "."
            )
    n = scalar(con, "SELECT count(DISTINCT exchange_id) FROM render_not_judged")
    if n:
        out.append(f"{_n(n, 'exchange')} not judged on the render checks: the reference could not render them (`not-judged` in the verdict table).")
    side = scalar(con, "SELECT count(DISTINCT exchange_id) FROM not_judged WHERE \"check\" IN ('null-leak', 'prompt-divergence') "
                       "AND NOT starts_with(reason, 'reference ')")
    if side:
        out.append(f"{_n(side, 'exchange')} not judged on null-leak and prompt-divergence: a side could not render them, so it has no "
                   "prompt to judge (`not-judged` in the verdict table; render-failure judges them).")
    return out


def render_route_lines(con: Any, opts: dict[str, Any]) -> list[str]:
    """With per-model templates (``--chat-template 'PATTERN=FILE'``): how many rendered exchanges
    each pattern took (first match, as :class:`replay.render.exchange.ModelRoutes` picks), and how
    many matched none (rendered with the plain ``--chat-template``, else ``json-tools``)."""
    import fnmatch

    routes = [r.partition("=") for r in opts.get("chat_template_routes") or []]
    if not routes:
        return []
    models = run_sql(con, "SELECT e.model FROM renders r JOIN exchanges e USING (exchange_id) WHERE r.side = 'old'").column("model").to_pylist()
    counts = {pattern: 0 for pattern, _, _ in routes}
    unmatched = 0
    for model in models:
        hit = next((p for p, _, _ in routes if model is not None and fnmatch.fnmatchcase(model, p)), None)
        if hit is None:
            unmatched += 1
        else:
            counts[hit] += 1
    fallback = f"`{opts['chat_template']}`" if opts.get("chat_template") else "`json-tools`"
    return [
        "Per-model templates: " + ", ".join(f"`{p}` -> `{f}` {counts[p]:,}" for p, _, f in routes)
        + f"; {_n(unmatched, 'exchange')} matched no pattern, rendered with {fallback}."
    ]


def mismatch_lines(table: Any) -> list[str]:
    """The report's sentences (Markdown) for the rows of query ``family_mismatch`` (an Arrow table
    or a list of its row dicts): one per (model, picked family, family it looks like), e.g.
    ``6 exchanges of model `Qwen/Qwen3-8B` (of 9) look like family `mistral`, not `hermes` ...;
    try `--parser mistral```. Empty when no row."""
    rows = table.to_pylist() if hasattr(table, "to_pylist") else list(table)
    out = []
    for r in rows:
        n = r["exchanges"]
        model = f"`{r['model']}`" if r["model"] is not None else "(no model name)"
        picked = f"not `{r['family']}`" if r["family"] is not None else "and no family matches its name"
        where = "served content" if r["from_content"] == n else "completions" if not r["from_content"] else "completions or served content"
        out.append(
            f"{n:,} exchange{'s' if n != 1 else ''} of model {model} (of {r['of_model']:,}) "
            f"look{'s' if n == 1 else ''} like family `{r['looks_like']}`, {picked}: `{r['marker']}` in the {where}, "
            f"where `{r['looks_like']}`'s parse finds {r['calls_found']:,} call{'s' if r['calls_found'] != 1 else ''}"
            + (f" and `{r['family']}`'s {r['calls_picked']:,}" if r["family"] is not None else "")
            + f"; try `--parser {r['looks_like']}` (`replay query family_mismatch`)."
        )
    return out


def chunking_lost_line(redactions: dict[str, int] | None) -> str | None:
    """The sentence on exchanges whose recorded chunking the secret scrub dropped, or None when
    none did. ``redactions``: ``run.json``'s ``ingest.redactions`` (:data:`replay.capture.redact.Redactions`),
    whose ``steps-dropped`` counts exchanges: a secret-shaped string split across two recorded
    deltas is replaced in the raw completion but not in the deltas, which then no longer join to
    the completion, so ingest drops them (:func:`replay.capture.redact.redact_exchange`) and the
    exchange is replayed under the synthetic chunkings only."""
    n = (redactions or {}).get("steps-dropped") or 0
    if not n:
        return None
    return (
        f"{_n(n, 'exchange')} lost {'its' if n == 1 else 'their'} recorded chunking: the secret scrub rewrote "
        f"{'its' if n == 1 else 'their'} completion (a secret-shaped string split across recorded deltas), so the "
        "deltas no longer joined to it and were dropped; the other chunkings still replay it."
    )


def ingest_sentence(con: Any, ingest: dict[str, Any]) -> str:
    """The ingest accounting as one Markdown sentence: lines (and records, where a line held
    several), exchanges, errors by reason, blank lines, skipped records, repeated ids, and the
    first error's ``file:line``. ``con``: a connection from :func:`replay.sql.connect` (the first
    error is read from ``ingest_errors``); ``ingest``: ``run.json`` ``ingest``. Returns the sentence."""
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted((ingest.get("errors_by_reason") or {}).items()))
    blank = ingest.get("blank_lines") or 0
    dup = ingest.get("duplicate_ids") or 0
    return (
        f"Ingested {lines_and_records(ingest.get('lines') or 0, ingest.get('shared_line_records') or 0)}: {_n(ingest.get('exchanges'), 'exchange')}, "
        f"{_n(ingest.get('errors'), 'error')}" + (f" ({reasons})" if reasons else "")
        + (f", {_n(blank, 'blank line')}" if blank else "")
        + (f", {ingest.get('skipped')} skipped (not an LLM exchange)" if ingest.get("skipped") else "")
        + (f"; {_n(dup, 'repeated id')} kept apart as `<id>@<file>:<line>`" if dup else "")
        + ("; first: " + _first_error(con) + "." if ingest.get("errors") else ".")
    )


def headlines(con: Any, meta: dict[str, Any], results: dict[str, pa.Table] | None = None) -> list[str]:
    """The run's headline numbers as sentences, in Markdown (one list item each).

    ``con``: a connection from :func:`replay.sql.connect`. ``meta``: ``run.json`` contents (names of
    the serializers, parsers, renderer, and the ingest statistics).
    """
    opts = meta.get("options", {})
    ser = {s: opts.get(f"{s}_serializer", s) for s in ("old", "new", "reference")}
    from replay.render.framework import framework_labels

    ser.update(framework_labels(con))  # a side a framework rendered is named by its release, not the unused serializer
    results = results if results is not None else run_report_queries(con)
    summary = _by(results["summary"].to_pylist(), "side")
    out: list[str] = []

    ingest = meta.get("ingest") or {}
    if ingest:
        out.append(ingest_sentence(con, ingest))
        if ingest.get("skipped_by"):
            out.append("Skipped, by reason: " + "; ".join(f"{v:,} {k}" for k, v in sorted(ingest["skipped_by"].items())) + ".")
        if (meta.get("filters") or {}).get("sentence"):
            out.append(f"Filters: {meta['filters']['sentence']}.")
        red = ingest.get("redactions") or {}
        if red.get("name") or any(k.startswith("value:") for k in red):
            shapes = sum(v for k, v in red.items() if k.startswith("value:"))
            out.append(f"Secrets dropped at ingest: {_n(red.get('name', 0), 'field')} named like one, {_n(shapes, 'value')} shaped like one.")
        lost = chunking_lost_line(red)
        if lost:
            out.append(lost)
        if opts.get("redact"):
            out.append(
                f"`--redact`: {_n(red.get('hashed', 0), 'message string')} hashed; the logged prompts and raw completions "
                f"were dropped, so nothing was re-streamed (the dropped-call and argument counts do not apply)."
            )

    out.extend(mismatch_lines(results["family_mismatch"]))  # the wrong parser judged these: said before any count

    old, new = summary.get("old", {}), summary.get("new", {})
    # denominators: the schemas each side serialized and rendered (a failed render counts nowhere)
    rendered = {
        side: scalar(con, "SELECT coalesce(sum(n_tools), 0) FROM renders WHERE side = ? AND error IS NULL", [side])
        for side in ("old", "new")
    }

    def of(side: str, count: int | None) -> str:
        if not rendered[side]:  # that side rendered no tool schema: nothing judged, no count
            return "– of 0"
        return f"{count or 0:,} of {rendered[side]:,}"

    if rendered["old"] or rendered["new"]:
        same = rendered["old"] == rendered["new"]
        out.append(
            f"{of('old', old.get('schemas_with_leaked_null'))} tool schemas carried a null the client never sent with "
            f"`{ser['old']}`; "
            + (f"{new.get('schemas_with_leaked_null') or 0:,}" if same else of("new", new.get("schemas_with_leaked_null")))
            + f" with `{ser['new']}`."
        )
        leaks = results["null_leaks"].to_pylist()
        per_field: dict[str, dict[str, int]] = {}
        for r in leaks:
            per_field.setdefault(r["field"], {})[r["side"]] = r["schemas_leaking"]
        for fld, counts in sorted(per_field.items(), key=lambda kv: -max(kv[1].values())):
            out.append(
                f"`{fld}: null` in {of('old', counts.get('old'))} schemas with `{ser['old']}`; "
                + (f"{counts.get('new', 0):,}" if same else of("new", counts.get("new")))
                + f" with `{ser['new']}`."
            )

    div = _by(results["divergent_prompts"].to_pylist(), "comparison")
    on = div.get("old vs new")
    if on and on["prompts_compared"]:
        sentence = f"{on['prompts_diverged']:,} of {on['prompts_compared']:,} prompts differ between `{ser['old']}` and `{ser['new']}`"
        if on.get("extra_tokens_total") is not None:
            sentence += (
                f"; the old side costs {on['extra_tokens_total']:,} extra prompt tokens in all "
                f"(mean {on['extra_tokens_mean']:,} per request, p99 {on['extra_tokens_p99']:,})"
            )
        out.append(sentence + ".")
        ref_o, ref_n = div.get("old vs reference"), div.get("new vs reference")
        if ref_o and ref_n:
            enc = meta.get("options", {}).get("reference_encoder")
            against = f"the reference encoder `{enc}` (tools by `{ser['reference']}`)" if enc else f"the client's own tool dicts (`{ser['reference']}`)"
            out.append(
                f"Against {against}: {ref_o['prompts_diverged']:,} of "
                f"{ref_o['prompts_compared']:,} prompts differ with `{ser['old']}`, {ref_n['prompts_diverged']:,} of "
                f"{ref_n['prompts_compared']:,} with `{ser['new']}`."
            )
    sv = div.get("served vs reference")
    if sv and sv["prompts_compared"]:
        out.append(f"{sv['prompts_diverged']:,} of {sv['prompts_compared']:,} prompts the server logged differ from the reference render.")
    fails = {s: summary.get(s, {}).get("render_failures") or 0 for s in ("old", "new", "reference")}
    if any(fails.values()):
        out.extend(render_failure_lines(fails, results.get("render_failures"), con))
    out.extend(render_route_lines(con, opts))

    calls_whole = (summary.get("reference") or {}).get("calls_whole") or 0
    n_completions = scalar(con, "SELECT count(*) FROM streams WHERE side = 'reference' AND error IS NULL")
    if n_completions:
        parsers = {
            s: scalar(con, "SELECT string_agg(DISTINCT parser, ', ' ORDER BY parser) FROM streams WHERE side = ? AND error IS NULL", [s])
            for s in ("old", "new")
        }
        out.append(
            f"The reference whole-text parse finds {_n(calls_whole, 'call')} in {_n(n_completions, 'raw completion')}, "
            f"replayed under {_chunkings_label(con)}."
        )
        for side in ("old", "new"):
            s = summary.get(side, {})
            out.append(
                f"{side.capitalize()} side ({_parsers_label(parsers[side])}): "
                + ", ".join(_measured(s, (
                    ("calls_dropped", f"{{:,}} of {_n(calls_whole, 'call')} dropped under at least one chunking",
                     "dropped calls not measured (no call in the whole-text parse of a replayed completion)"),
                    ("non_json_joins", "{:,} with non-JSON joined arguments", "non-JSON joins not measured (no call streamed)"),
                    ("argument_mismatches", "{:,} with arguments that differ from the whole-text parse",
                     "argument mismatches not measured (no call streamed with JSON arguments)"),
                ))) + "."
            )
    served = summary.get("served", {})
    n_served = scalar(con, "SELECT count(*) FROM exchanges WHERE served_tool_calls IS NOT NULL "
        "OR served_finish_reason IS NOT NULL OR served_content IS NOT NULL")
    if n_served:
        out.append(
            f"What clients received ({_n(n_served, 'captured response')}): "
            + "{}; {}, {}".format(*_measured(served, (
                ("non_json_joins", lambda n: f"{_n(n, 'call')} with non-JSON arguments", "non-JSON arguments not measured (no call received)"),
                ("calls_dropped", lambda n: f"{_n(n, 'call')} of the whole-text parse missing",
                 "missing calls not measured (no call in the whole-text parse of a served exchange's raw completion)"),
                ("argument_mismatches", "{:,} with different arguments",
                 "argument differences not measured (no call received with JSON arguments where the whole-text parse has one)"),
            ))) + "."
        )
    elif scalar(con, "SELECT count(*) FROM exchanges"):
        out.append(
            "No exchange has a captured response or stream: what clients received was not judged "
            "(– in the summary's served column and the `served:` verdict rows, not 0)."
        )
    from replay.capture.headlines import capture_headlines

    out.extend(capture_headlines(results))
    for side, noun, what in (("reference", "raw completion", "the reference could not parse"), ("old", "old-side replay", "failed"), ("new", "new-side replay", "failed")):
        n_err = scalar(con, "SELECT count(*) FROM streams WHERE side = ? AND error IS NOT NULL", [side])
        if n_err:
            first = scalar(con, "SELECT mode(error) FROM streams WHERE side = ? AND error IS NOT NULL", [side])
            out.append(
                f"{_n(n_err, noun)} {what}; the call counts above leave them out. "
                f"Most common error: `{_short(first)}` (all in `streams.error`)."
            )
    out.extend(_side_lines(meta.get("sides") or {}))
    out.extend(executor_lines(meta.get("executors") or {}))
    return out


_STAGE_TABLE = {"render": ("render", "renders"), "stream": ("re-stream", "streams"), "ingest": ("ingest", "ingest_errors")}
#: How the rows of a failed batch are found in each table (ingest_errors: the detail of the
#: ``internal-error`` rows, :func:`replay.capture.ingest.failed_batch`).
_FAILED_WHERE = {"ingest_errors": "detail LIKE 'WorkerError%'"}


def executor_lines(executors: dict[str, Any]) -> list[str]:
    """A sentence per stage whose executor lost a process or a batch (``run.json`` ``executors``:
    :func:`replay.runner.plan.executor_meta`): the pool's restarts, the batches run again alone and
    those that failed again, whose rows carry the error; on Ray, the batches whose task failed
    after its retry. Nothing for a stage that went through cleanly."""
    out = []
    for stage, s in executors.items():
        if not isinstance(s, dict):
            continue
        label, table = _STAGE_TABLE.get(stage, (stage, stage))
        failed = s.get("batches_failed") or 0
        cond = _FAILED_WHERE.get(table, "error LIKE 'WorkerError%'")
        where = f"(`replay query --sql \"SELECT * FROM {table} WHERE {cond}\"`)"
        rows = "its rows carry" if failed == 1 else "their rows carry"

        def batches(n: int | None) -> str:
            return f"{n or 0:,} batch" + ("" if n == 1 else "es")

        if s.get("engine") == "pool" and s.get("pool_restarts"):
            tail = f"; {batches(failed)} failed again and {rows} the error {where}" if failed else ", and each went through"
            out.append(
                f"The {label} stage's pool of {s.get('jobs')} processes lost a process {_n(s['pool_restarts'], 'time')}: "
                f"{batches(s.get('batches_retried'))} run again alone{tail}."
            )
        elif s.get("engine") == "ray" and failed:
            out.append(f"On Ray, the {label} stage failed on {batches(failed)} after a retry: {rows} the error {where}.")
    return out


def _side_lines(sides: dict[str, Any]) -> list[str]:
    """A sentence per out-of-process side (``run.json`` ``sides``): its interpreter, Python
    version, and its worker's restarts with the first incident."""
    out = []
    for side, m in sides.items():
        if not isinstance(m, dict) or m.get("in_process", True):
            continue
        line = f"{side.capitalize()} side ran in `{m.get('python')}` (Python {m.get('python_version')}) as a worker process"
        restarts = m.get("restarts") or 0
        incidents = m.get("incidents") or []
        if restarts or incidents:
            line += f"; restarted {_n(restarts, 'time')}" if restarts else f"; {_n(len(incidents), 'incident')}"
            if incidents:
                first = incidents[0]
                line += f" (first: exchange `{first.get('exchange_id')}`: {_short(first.get('error'))})"
        if m.get("dead"):
            line += f"; it could not be restarted: {_short(m['dead'])}"
        out.append(line + ".")
    return out



def _chunkings_label(con: Any) -> str:
    """Which sides ran which chunkings, from the ``streams`` table: ``"old: recorded, whole; new:
    recorded, whole, char, ..., split-K (312 two-way splits)"`` (one entry when both sides ran the
    same set). The two-way splits of ``split-all`` are counted, not listed."""
    got = {}
    for side in ("old", "new"):
        rows = con.execute(
            "SELECT chunking, min(rowid) AS first FROM (SELECT chunking, row_number() OVER () AS rowid FROM streams "
            "WHERE side = ? AND chunking <> 'parse') GROUP BY chunking ORDER BY first",
            [side],
        ).fetchall()
        order = ("recorded", "whole", "char", "char-raw", "token")
        names = sorted((r[0] for r in rows if not re.fullmatch(r"split-[0-9]+", r[0])), key=lambda c: (c not in order, order.index(c) if c in order else 0))
        splits = len(rows) - len(names)
        if splits == 1:
            names += [r[0] for r in rows if re.fullmatch(r"split-[0-9]+", r[0])]
        elif splits:
            names.append(f"split-K ({splits:,} distinct two-way splits)")
        got[side] = ", ".join(names) or "none"
    if got["old"] == got["new"]:
        return f"the chunkings {got['old']} on both sides"
    return f"the chunkings old side: {got['old']}; new side: {got['new']}"

def markdown_report(
    con: Any,
    meta: dict[str, Any],
    results: dict[str, pa.Table] | None = None,
    lines: list[str] | None = None,
    exemplars: list[Any] | None = None,
) -> str:
    """The whole ``report.md``: the verdict table (with the fidelity sentence and the ``exemplars``
    of :func:`replay.report.exemplars.write_exemplars`, if given), headline sentences, the summary table,
    and one section per check.

    ``con``: a connection from :func:`replay.sql.connect`; ``meta``: ``run.json`` contents;
    ``results`` / ``lines``: the query results and headline sentences when already computed.
    """
    opts = meta.get("options", {})
    results = results if results is not None else run_report_queries(con)
    parts = ["# replay audit", ""]
    judged = run_sql(con, "SELECT (SELECT count(*) FROM renders) + (SELECT count(*) FROM streams) AS n").column("n")[0].as_py()
    if not judged:  # made by `replay ingest` alone: an all-zero table would read as judged
        parts += [
            "## Verdicts",
            "",
            (
                "Not judged: this run was not rendered or re-streamed (no `renders` or `streams` rows, as after "
                "`replay ingest` alone). Run `replay render --run RUN` and `replay stream --run RUN`, or `replay audit`."
            ),
            "",
        ]
    else:
        parts.append(verdict_markdown(results["verdicts"], results["fidelity"], exemplars or []))
    if judged:
        parts.append(
            "Sides: old = `{old}`, new = `{new}`, reference = `{ref}` (tool serializers); renderer `{renderer}`{enc}; "
            "parsers old = `{op}`, new = `{np}` (reference: {rp}).".format(
                old=opts.get("old_serializer"),
                new=opts.get("new_serializer"),
                ref=opts.get("reference_serializer"),
                renderer=opts.get("renderer"),
                enc=f", reference encoder `{opts['reference_encoder']}`" if opts.get("reference_encoder") else "",
                op=opts.get("old_parser") or "family default",
                np=opts.get("new_parser") or "family default",
                rp=f"the whole-text parse of `{opts['reference_parser']}`" if opts.get("reference_parser") else "the built-in whole-text parse",
            )
        )
    parts.append("")
    results = results if results is not None else run_report_queries(con)
    lines = lines if lines is not None else headlines(con, meta, results)
    parts.extend(f"- {s}" for s in lines)
    parts += ["", "## Summary", "", markdown_table(summary_by_side(results["summary"])), ""]
    parts += ["`replay query summary --run RUN` gives the same counts one row per side.", ""]
    for name in ("family_mismatch", "null_leaks", "divergent_prompts", "dropped_calls", "non_json_joins", "served_checks", "capture_formats"):
        q = get_query(name)
        table = results[name]
        if name == "family_mismatch" and not table.num_rows:
            continue  # shown only when some completions look like another family
        parts += [f"## {q.title}", "", f"`replay query {name}`", ""]
        parts.append(markdown_table(table) if table.num_rows else "_No rows._")
        parts.append("")
    errors = run_sql(
        con,
        "SELECT source_file || ':' || coalesce(source_line::VARCHAR, '?') AS line, reason, detail "
        "FROM ingest_errors ORDER BY source_file, source_line LIMIT 20",
    )
    if errors.num_rows:
        parts += ["## Lines that did not become exchanges", "", "`replay query ingest_errors --run RUN` lists them all, by file and line.", ""]
        parts += [markdown_table(errors), ""]
    parts.append(f"_replay {meta.get('versions', {}).get('replay', '')}; inputs: {len(meta.get('inputs', []))} files._")
    return "\n".join(parts) + "\n"


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


def verdict_markdown(verdicts: pa.Table, fidelity: pa.Table, exemplars: list[Any]) -> str:
    """The section ``report.md`` leads with: the verdict table, the fidelity sentence, and for each
    check with broken or still-wrong exchanges its smallest failing chunking and redacted exemplar."""
    parts = ["## Verdicts", ""]
    parts.append(
        "Exchanges per check, old against new, each judged against the reference under every chunking "
        "(`fixed`: old wrong, new right; `improved`: both wrong, new under a strict subset of old's failing chunkings "
        "or leaked paths; `broken`: old right, new wrong; `still-wrong`: both wrong alike; "
        "`changed-wrong`: both wrong, differently; `unreliable`: the replay did not reproduce what was served). "
        "Each exchange is in exactly one column, so a row sums to `exchanges`. "
        + "; ".join(f"`{c.name}`: {c.sentence}" for c in checks.REGISTRY if c.explained) + ". "
        "Rows `served:...` judge what clients were served (`wrong`). `replay query verdicts`; per exchange: "
        "`replay query verdict_exchanges`."
    )
    parts += ["", markdown_table(verdicts), ""]
    parts.append(fidelity_sentence(fidelity))
    parts.append("")
    for e in exemplars:
        parts += [f"### {e.check}: {e.broken:,} broken, {e.still_wrong:,} still wrong", "", e.markdown, ""]
    return "\n".join(parts)
