"""``replay show ID --run RUN``: one exchange, for the reader of a pull request.

What it shows: the old, new and reference prompts as unified diffs (the differing regions with
context lines, the token and char counts of each side); the served calls against the calls each
side's replay assembled, per chunking; the smallest failing chunking's deltas, with the delta where
the stream went wrong marked; and why the exchange is ``unreliable`` (what was served against the
old side's replay, field by field, as ``queries/_fidelity_exchanges.sql`` compares them).

Prompts are **re-rendered**, not stored: the render stage keeps only each prompt's SHA-256 and
length (``renders``), and this module renders the one exchange again from ``run.json``'s options
(serializers, renderer or chat template, tokenizer, ``--date``: everything a render depends on is
recorded, and rendering is deterministic), through the render stage's own
:func:`replay.render.exchange.render_rows`. Cost in run size: nothing. The cost instead: ``show``
needs the run's template, tokenizer and plugins where it runs; each re-rendered prompt is checked
against the SHA-256 the run recorded, and a mismatch is said (the diff is then of today's
renders, not the judged ones). Sides that ran in another interpreter (``--old-python``) are
re-rendered and re-streamed here, in this one. Storing the texts instead (zstd, deduplicated by
SHA-256) was measured by ``benchmarks/bench_show_storage.py`` (figures: ``benchmarks/RESULTS.md``)
on a capture that repeats a few requests; on real traffic every request's messages differ and a chat
template puts them in the prompt, so the store would grow with the capture's text itself, which
the run already holds in ``exchanges.request_json``: re-rendering costs no bytes and cannot drift
from the request.

Message text is shown as captured (this is the user's own data, read locally); ``mask=True``
(``--mask``) masks it as the exemplars do (:func:`replay.mask.redact_text`).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from replay import exactjson

__all__ = ["ShowError", "Shown", "show_exchange", "where_it_went_wrong", "spec_from_options"]


class ShowError(ValueError):
    """No such exchange in the run, or not a run folder."""


@dataclass
class Shown:
    """What :func:`show_exchange` found: sections of (title, lines), rendered by :meth:`text` or
    :meth:`markdown`."""

    exchange_id: str
    sections: list[tuple[str, list[str], bool]] = field(default_factory=list)  # (title, lines, is_code)

    def add(self, title: str, lines: list[str], code: bool = True) -> None:
        self.sections.append((title, lines, code))

    def text(self) -> str:
        """Plain text for the terminal."""
        out = []
        for title, lines, _ in self.sections:
            out += [f"== {title}", *lines, ""]
        return "\n".join(out)

    def markdown(self) -> str:
        """Markdown for pasting into a pull request (code blocks fenced longer than any backtick run)."""
        out = [f"### `replay show {self.exchange_id}`", ""]
        for title, lines, code in self.sections:
            out += [f"**{title}**", ""]
            if code:
                body = "\n".join(lines)
                fence = "```"
                while fence in body:
                    fence += "`"
                lang = "diff" if any(line.startswith(("@@", "--- ", "+++ ")) for line in lines) else ""
                out += [fence + lang, body, fence, ""]
            else:
                out += [*lines, ""]
        return "\n".join(out)


#: ``run.json`` option keys of the per-side settings (the flat words the stages record); a run
#: with ``options.sides`` (the values as given, :mod:`replay.side`) is rebuilt from those instead.
_SIDE_OPTION_KEYS = frozenset(
    f"{side}_{key}" for side in ("old", "new", "reference")
    for key in ("serializer", "preparer", "chat_template", "renderer", "parser", "python", "pythonpath", "render_in")
) | {"reference_encoder"}
#: Side keys ``show`` leaves out: it runs and renders every side in this process.
_OUT_OF_PROCESS = ("python", "pythonpath", "render_in")


def spec_from_options(options: dict[str, Any]) -> Any:
    """A :class:`replay.runspec.RunSpec` from ``run.json``'s ``options``. The sides: from
    ``options.sides``, each value read back as it was given (:func:`replay.side.from_json`), when
    the run has it; a run written before it has the flat per-side words instead, used as they
    are. The shared options: every RunSpec field the options hold, lists as tuples; the recorded
    renderer *name* is used as a spec only when it is not the default ``json-tools`` and no chat
    template was given. The interpreters of out-of-process sides are dropped, and where they
    rendered (``show`` runs and renders every side here). Raises ValueError
    (:class:`replay.side.SideError`) for a side value that does not parse."""
    import dataclasses

    from replay.runspec import RunSpec
    from replay.side import SideSpec, from_json, spec_fields

    fields = {f.name for f in dataclasses.fields(RunSpec)}
    as_given = options.get("sides")
    given: dict[str, Any] = {}
    for key, value in options.items():
        if key not in fields or value is None:
            continue
        if key in ("old_pythonpath", "new_pythonpath", "old_python", "new_python", "old_render_in", "new_render_in"):
            continue
        if isinstance(as_given, dict) and key in _SIDE_OPTION_KEYS:
            continue  # from the values as given, below
        given[key] = tuple(value) if isinstance(value, list) else value
    renderer = given.pop("renderer", None)
    if renderer and renderer != "json-tools" and not given.get("chat_template") and not str(renderer).startswith("chat-template"):
        given["renderer"] = renderer
    for key in ("old_renderer", "new_renderer"):
        if str(given.get(key, "")).startswith("chat-template"):
            given.pop(key)
    ref = given.get("reference_encoder")
    if ref and str(ref).startswith("encoder:"):
        given["reference_encoder"] = str(ref)[len("encoder:") :]
    if isinstance(as_given, dict):
        sides = {}
        for side, value in as_given.items():
            spec = from_json(value, side)
            sides[side] = SideSpec(**{k: v for k, v in spec.items().items() if k not in _OUT_OF_PROCESS})
        given.update(spec_fields(sides))
    given.pop("batch_rows", None)
    return RunSpec(**given)


def _rows(con: Any, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cur = con.execute(sql, params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _diff_lines(text: str) -> list[str]:
    """Lines to diff: the prompt's lines, a long one (JSON of tools on one line) cut after each
    ``, "`` so that a diff shows the differing key, not a whole line of schemas."""
    out = []
    for line in text.splitlines():
        if len(line) > 120:
            out.extend(re.sub(r', (?=")', ",\n", line).split("\n"))
        else:
            out.append(line)
    return out


def unified(a: str, b: str, name_a: str, name_b: str, context: int = 2) -> list[str]:
    """The unified diff of two prompts (:func:`_diff_lines`), or one line saying they are equal."""
    if a == b:
        return [f"{name_a} and {name_b}: identical ({len(a):,} chars)"]
    return [line.rstrip("\n") for line in difflib.unified_diff(_diff_lines(a), _diff_lines(b), name_a, name_b, n=context, lineterm="")]


def _calls_text(calls: list[dict[str, Any]] | None) -> str:
    if not calls:
        return "no call"
    return ", ".join(f"{c.get('index')}:{c.get('name')}({c.get('arguments')})" for c in calls)


def where_it_went_wrong(parser_cls: Any, tools: Any, deltas: list[str], expected: Any, *, reasoning_open: bool = False) -> tuple[int | None, str]:
    """The delta where a stream goes wrong, as a 0-based index into ``deltas``.

    ``wrong(k)`` feeds ``deltas[:k]`` one by one and the rest joined as one last delta, and
    compares the assembled result with ``expected`` (the reference whole-text parse; calls by
    name and JSON value, content with its ends stripped). ``wrong(0)`` is the whole text as one
    delta, ``wrong(n - 1)`` the chunking itself; each ``k`` adds the cut before ``deltas[k]``. The
    smallest ``k`` that is wrong names the first cut the parser mishandles, and the delta after it
    is returned. Returns ``(k, why)``; ``(None, why)`` when the stream is wrong even as one delta
    (the fault is not where the text is cut: ``finish()`` or the parse) or right under every prefix.
    Linear up to 400 deltas, else a bisection (which assumes that once wrong, a longer prefix
    stays wrong)."""
    from replay.stream import replay_stream

    def wrong(k: int) -> list[str]:
        pieces = deltas[:k] + (["".join(deltas[k:])] if k < len(deltas) else [])
        try:
            got = replay_stream(parser_cls, tools, pieces, reasoning_open=reasoning_open)
        except Exception as exc:  # noqa: BLE001 - the parser's own fault
            return [f"raised {type(exc).__name__}: {exc}"]
        return _differences(got, expected)

    first = wrong(0)
    if first:
        return None, "wrong even with the completion as one delta: " + "; ".join(first)
    n = len(deltas)
    if n <= 400:
        for k in range(1, n):
            problems = wrong(k)
            if problems:
                return k, "; ".join(problems)
        return None, "right under every prefix"
    lo, hi = 0, n - 1
    if not wrong(hi):
        return None, "right under every prefix"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if wrong(mid):
            hi = mid
        else:
            lo = mid
    return hi, "; ".join(wrong(hi))


def _differences(got: Any, expected: Any) -> list[str]:
    from replay.stream import same_call

    out = []
    if len(got.calls) != len(expected.calls):
        out.append(f"{len(got.calls)} calls, the reference parse has {len(expected.calls)}")
    for g, w in zip(got.calls, expected.calls):
        if g.name != w.name:
            out.append(f"call {g.index}: name {g.name!r}, expected {w.name!r}")
        elif not same_call(g.arguments, w.arguments):
            out.append(f"call {g.index}: arguments {g.arguments!r}, expected {w.arguments!r}")
    if (got.content or "").strip() != (expected.content or "").strip():
        out.append(f"content {got.content!r}, expected {expected.content!r}")
    return out


def show_exchange(run_dir: str | Path, exchange_id: str, *, mask: bool = False) -> Shown:
    """Everything ``replay show`` prints about one exchange of the run in ``run_dir``.

    Raises :class:`ShowError` when ``run_dir`` is not a run, is a ``replay matrix`` run (no old and
    new sides) or has no such exchange. Never
    raises for what it re-renders or re-streams: a failure is said in its section.
    """
    from replay.sql import connect

    run_dir = Path(run_dir)
    if not (run_dir / "exchanges.parquet").is_file():
        raise ShowError(f"{run_dir}: not a run folder (no exchanges.parquet)")
    from replay.matrix_vars import recorded_order

    if recorded_order(run_dir) is not None:  # a replay matrix run has named sides, no old and new
        raise ShowError(f"{run_dir} is a replay matrix run: replay show reads an audit's old and new sides; its exchanges per "
                        "check and side are in report.html and `replay query matrix_exemplars --run RUN`")
    con = connect(run_dir)
    try:
        found = _rows(con, "SELECT * FROM exchanges WHERE exchange_id = ?", [exchange_id])
        if not found:
            near = [r["exchange_id"] for r in _rows(con, "SELECT exchange_id FROM exchanges ORDER BY jaro_winkler_similarity(exchange_id, ?) DESC LIMIT 3", [exchange_id])]
            raise ShowError(f"no exchange {exchange_id!r} in {run_dir}" + (f" (closest: {', '.join(near)})" if near else ""))
        ex = found[0]
        try:
            meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        return _show(con, run_dir, ex, meta, mask)
    finally:
        con.close()


def _show(con: Any, run_dir: Path, ex: dict[str, Any], meta: dict[str, Any], mask: bool) -> Shown:
    from replay.mask import declared_names, redact_text

    xid = ex["exchange_id"]
    shown = Shown(xid)
    try:
        request = exactjson.loads(ex["request_json"])
    except orjson.JSONDecodeError:
        request = {}
    keep = declared_names(request.get("tools") if isinstance(request, dict) else None)
    red = (lambda t: redact_text(t, keep)) if mask else (lambda t: t)

    # every column of the view, read by name: a column another version lacks reads as absent
    verdicts = _rows(con, "SELECT * FROM verdicts_by_exchange WHERE exchange_id = ? ORDER BY \"check\"", [xid])
    head = [
        f"exchange {xid}: model {ex.get('model')}, route {ex.get('route')}, {ex.get('capture_format')} capture "
        f"{ex.get('source_file')}:{ex.get('source_line')}",
    ]
    for v in verdicts:
        extra = f" (smallest failing chunking {v['smallest_failing_chunking']}, {v.get('smallest_failing_deltas')} deltas)" if v.get("smallest_failing_chunking") else ""
        head.append(f"  {v['check']:<18} {v['verdict']}{' unreliable' if v.get('unreliable') else ''}{extra}")
    if not verdicts:
        head.append("  not judged (no renders or streams rows for it)")
    shown.add("verdicts", head)

    spec = None
    try:
        spec = spec_from_options(meta.get("options") or {})
    except (TypeError, ValueError) as exc:
        shown.add("prompts", [f"cannot rebuild the run's options: {exc}"])
    if spec is not None:
        _prompts(con, shown, ex, spec, red)
    _streams(con, shown, ex, red)
    if spec is not None:
        _smallest(con, shown, ex, spec, meta, red)
    _fidelity(con, shown, ex, red)
    return shown


def _prompts(con: Any, shown: Shown, ex: dict[str, Any], spec: Any, red: Any) -> None:
    from replay.stages.context import stage_context
    from replay.render.exchange import render_rows

    rows = {r["side"]: r for r in _rows(con, "SELECT side, serializer, renderer, prompt_sha256, prompt_chars, prompt_tokens, error, "
                                             "[x.tool_index::VARCHAR || ' ' || x.path FOR x IN leaked_nulls] AS leaked FROM renders WHERE exchange_id = ?", [ex["exchange_id"]])}
    if not rows:
        shown.add("prompts", ["not rendered (no renders rows: no request captured, or the render stage did not run)"])
        return
    prompts: dict[str, str] = {}
    try:
        ctx = stage_context(spec)
        again = {r["side"]: r for r in render_rows(ex, ctx.cfg, ctx.sides.serializers, prompts=prompts)}
    except Exception as exc:  # noqa: BLE001 - a template or plugin that no longer loads here
        shown.add("prompts", [f"cannot re-render here: {type(exc).__name__}: {exc}"])
        return
    if ex.get("server_prompt") is not None:
        prompts["served"] = ex["server_prompt"]
    lines = []
    for side in ("old", "new", "reference", "served"):
        r = rows.get(side)
        if r is None:
            continue
        tokens = f"{r['prompt_tokens']:,} tokens, " if r.get("prompt_tokens") is not None else ""
        state = f"error: {r['error']}" if r.get("error") else f"{tokens}{r['prompt_chars'] or 0:,} chars, sha256 {str(r['prompt_sha256'])[:12]}"
        match = ""
        if side != "served" and not r.get("error"):
            now = again.get(side, {}).get("prompt_sha256")
            match = "" if now == r["prompt_sha256"] else f"  (re-rendered here: sha256 {str(now)[:12]}, not the judged prompt)"
        leaked = f"; leaked nulls: {', '.join(r['leaked'])}" if r.get("leaked") else ""
        lines.append(f"{side:<9} {r.get('serializer') or '':<14} {r.get('renderer')}: {state}{leaked}{match}")
    shown.add("prompts (re-rendered from run.json's options)", lines)
    pairs = [("old", "new"), ("new", "reference"), ("served", "reference")]
    for a, b in pairs:
        if a in prompts and b in prompts and not (rows.get(a) or {}).get("error") and not (rows.get(b) or {}).get("error"):
            shown.add(f"prompt diff: {a} -> {b}", unified(red(prompts[a]), red(prompts[b]), a, b))


def _streams(con: Any, shown: Shown, ex: dict[str, Any], red: Any) -> None:
    xid = ex["exchange_id"]
    streams = _rows(con, "SELECT side, chunking, n_deltas, parser, finish_reason, error, content FROM streams WHERE exchange_id = ? "
                         "ORDER BY CASE side WHEN 'reference' THEN 0 WHEN 'old' THEN 1 ELSE 2 END, n_deltas, chunking", [xid])
    calls = _rows(con, "SELECT side, chunking, index, name, arguments FROM calls WHERE exchange_id = ? ORDER BY index", [xid])
    lines = []
    served = ex.get("served_tool_calls")
    if served is not None or ex.get("served_finish_reason") is not None:
        lines.append(f"served    {'':<10} {_calls_text([{**c, 'arguments': red(c.get('arguments'))} for c in served or []])}; finish_reason {ex.get('served_finish_reason')}")
    if not streams:
        shown.add("calls", lines + ["not re-streamed (no raw completion, or the stream stage did not run)"])
        return
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in calls:
        by.setdefault((c["side"], c["chunking"]), []).append({**c, "arguments": red(c["arguments"])})
    # one line per side and outcome, naming the chunkings that gave it
    groups: dict[tuple[str, str], list[str]] = {}
    for s in streams:
        outcome = f"error: {s['error']}" if s["error"] else f"{_calls_text(by.get((s['side'], s['chunking'])))}; finish_reason {s['finish_reason']}"
        label = s["chunking"] if s["chunking"] == "parse" else f"{s['chunking']}({s['n_deltas']})"
        groups.setdefault((s["side"], outcome), []).append(label)
    for (side, outcome), labels in groups.items():
        lines.append(f"{side:<9} {', '.join(labels)}: {outcome}")
    shown.add("calls: served against each replay (chunking(deltas); parse = whole-text parse)", lines)


def _smallest(con: Any, shown: Shown, ex: dict[str, Any], spec: Any, meta: dict[str, Any], red: Any) -> None:
    from replay.stages.context import ParserResolver
    from replay.stages.stream import prompt_opens_reasoning
    from replay.prepare import openai_tools
    from replay.runspec import config_for
    from replay.report.exemplars import cut_at

    xid = ex["exchange_id"]
    pick = _rows(con, "SELECT \"check\", chunking, new_deltas, old_wrong, new_wrong FROM verdict_pairs WHERE exchange_id = ? AND chunking NOT IN ('parse', 'render') "
                      "AND (new_wrong OR old_wrong) ORDER BY NOT new_wrong, new_deltas, chunking LIMIT 1", [xid])
    if not pick or ex.get("server_output_text") is None:
        return
    p = pick[0]
    side = "new" if p["new_wrong"] else "old"
    chunking = p["chunking"]
    title = f"smallest failing chunking: {chunking} ({p['check']}, {side} side)"
    try:
        cfg = config_for(spec)
        resolver = ParserResolver(cfg)
        family = resolver.family(ex.get("model"))
        if family is None:
            shown.add(title, ["no parser family for this model"])
            return
        sides = resolver.sides(family)
        cls = getattr(sides, side)
        tools = openai_tools(ex.get("route"), exactjson.loads(ex["request_json"]).get("tools"))
        text = ex["server_output_text"]
        stored = _rows(con, "SELECT delta_lengths FROM streams WHERE exchange_id = ? AND side = ? AND chunking = ?", [xid, side, chunking])
        lengths = stored[0]["delta_lengths"] if stored else None
        if lengths is None:
            shown.add(title, ["no delta lengths stored for this chunking (a run written before replay stored them: re-run `replay stream`)"])
            return
        try:
            deltas = cut_at(text, list(lengths))  # the cut the replay made (streams.delta_lengths), not cut again
        except ValueError as exc:  # lengths that do not cover the completion
            shown.add(title, [f"deltas not shown: {exc}"])
            return
        opens = prompt_opens_reasoning(ex.get("server_prompt"))
        from replay.stream import new_parser

        expected = new_parser(sides.reference, tools, reasoning_open=opens).parse(text)
        k, why = where_it_went_wrong(cls, tools, deltas, expected, reasoning_open=opens)
    except Exception as exc:  # noqa: BLE001 - a plugin that no longer loads here
        shown.add(title, [f"cannot replay here: {type(exc).__name__}: {exc}"])
        return
    lines = [f"expected (reference whole-text parse): {_calls_text([{'index': c.index if hasattr(c, 'index') else i, 'name': c.name, 'arguments': red(c.arguments)} for i, c in enumerate(expected.calls)])}"]
    shown_deltas = deltas if len(deltas) <= 80 else None
    for i, d in enumerate(deltas):
        if shown_deltas is None and not (k is not None and abs(i - k) <= 5) and i >= 5:
            continue
        mark = "   <-- went wrong here (the cut before this delta)" if k is not None and i == k else ""
        lines.append(f"{i + 1:>4} {json.dumps(red(d), ensure_ascii=False)}{mark}")
    if k is None:
        lines.append(f"     (no single delta: {why})")
    else:
        lines.append(f"     cutting before delta {k + 1} breaks it: {why}")
    shown.add(title, lines)


def _fidelity(con: Any, shown: Shown, ex: dict[str, Any], red: Any) -> None:
    xid = ex["exchange_id"]
    got = _rows(con, "SELECT * FROM fidelity_exchanges WHERE exchange_id = ?", [xid])
    if not got:
        return
    f = got[0]
    if f["faithful"]:
        shown.add("replay fidelity", [f"the old side's replay ({f['replay_chunking']}) reproduces what was served: the stream verdicts are reliable"])
        return
    old = _rows(con, "SELECT content, finish_reason, error FROM streams WHERE exchange_id = ? AND side = 'old' AND chunking = ?", [xid, f["replay_chunking"]])
    old_calls = _rows(con, "SELECT index, name, arguments FROM calls WHERE exchange_id = ? AND side = 'old' AND chunking = ? ORDER BY index", [xid, f["replay_chunking"]])
    o = old[0] if old else {}
    served_calls = [{**c, "arguments": red(c.get("arguments"))} for c in ex.get("served_tool_calls") or []]
    lines = [f"unreliable: the old side's replay ({f['replay_chunking']}) does not reproduce what was served:"]
    lines.append(f"  calls          {'same' if f['calls_equal'] else 'DIFFER'}: served {_calls_text(served_calls)}")
    lines.append(f"                 {'':<6}old replay {_calls_text([{**c, 'arguments': red(c['arguments'])} for c in old_calls])}")
    lines.append(f"  content        {'same' if f['content_equal'] else 'DIFFERS'}: served {json.dumps(red(ex.get('served_content')), ensure_ascii=False)}; "
                 f"old replay {json.dumps(red(o.get('content')), ensure_ascii=False)}")
    lines.append(f"  finish_reason  {'same' if f['finish_equal'] else 'DIFFERS'}: served {ex.get('served_finish_reason')}; old replay {o.get('finish_reason')}")
    if f["replay_error"]:
        lines.append(f"  replay error   {o.get('error')}")
    shown.add("why unreliable (served against the old replay, field by field)", lines)
