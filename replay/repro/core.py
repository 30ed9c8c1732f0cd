"""``replay repro RUN ID --check CHECK``: the smallest case that still fails, from a run's exchange.

:func:`load` reads the exchange, the side and the failing chunking from the run folder (the
``verdict_pairs`` row of the check where the side is wrong, with the fewest deltas; its cut from
``streams.delta_lengths``) and the sides from ``run.json`` (the tested side's parser in its own
interpreter, as the audit ran it). :func:`shrink` then shrinks, in this order and each pass with
:func:`replay.repro.shrink.ddmin` under one time bound: the tool list, the completion (family
markers whole, the failing cut kept), the cuts (fewest deltas), the completion again, then inside
each kept tool its description and parameter properties (``required`` follows). Every
candidate is judged by :class:`replay.repro.judge.Judge`: kept only when the side still fails the
check and the reference still passes it. :func:`mask` then replaces the user text as the
exemplars mask it (:mod:`replay.mask`) and says when the failure needs the exact text.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replay.repro import DEFAULT_SECONDS, STREAM_CHECKS
from replay.repro.judge import Candidate, Judge, ReproError
from replay.repro.shrink import Budget, atoms, ddmin, from_atoms

__all__ = ["Loaded", "Shrunk", "load", "shrink", "mask", "DEFAULT_SECONDS"]

#: Default time bound of the shrinking passes (seconds; ``--max-seconds``).


@dataclass
class Loaded:
    """What the run says about the failure: the exchange row ``ex``, its request ``request``,
    ``side`` (old/new), the failing ``chunking`` and its ``deltas``, the run's ``spec``
    (:class:`replay.runspec.RunSpec`, the side's interpreter kept) and ``options`` (run.json)."""

    run_dir: Path
    ex: dict[str, Any]
    request: dict[str, Any]
    side: str
    check: str
    chunking: str
    deltas: list[str]
    spec: Any
    options: dict[str, Any]

    @property
    def side_parser(self) -> str | None:
        return self.options.get(f"{self.side}_parser")

    @property
    def side_python(self) -> str | None:
        return self.options.get(f"{self.side}_python")


@dataclass
class Shrunk:
    """The result of :func:`shrink`: the first and last failing candidates, the messages kept,
    what each pass did, the candidates judged, and whether the time bound cut it short."""

    before: Candidate
    after: Candidate
    messages_before: int
    messages: list[dict[str, Any]]
    judged: int
    timed_out: bool
    masked: bool = False
    exact_text: list[str] = field(default_factory=list)  # words the failure needs as captured

    def sizes(self) -> dict[str, list[int]]:
        """``{"chars": [before, after], "deltas": [...], "tools": [...], "messages": [...]}``."""
        b, a = self.before, self.after
        return {
            "chars": [len(b.text), len(a.text)],
            "deltas": [len(b.deltas), len(a.deltas)],
            "tools": [len(b.tools), len(a.tools)],
            "messages": [self.messages_before, len(self.messages)],
        }


def _rows(con: Any, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def load(run_dir: str | Path, exchange_id: str, check: str, side: str | None = None, fixed: str | None = None) -> Loaded:
    """The failure of ``check`` on exchange ``exchange_id`` in the run ``run_dir``, on ``side``
    (default: ``new`` when the new side is wrong, else ``old``). ``fixed`` (``old``/``new``): the
    failing chunking is picked among those where that side is right, when there are some.

    Raises :class:`ReproError` for a folder that is not a run, a run a command left incomplete
    (``run.json`` ``incomplete``), a ``replay matrix`` run (its sides
    are named, not old and new), an unknown exchange or check, a
    check that is not a stream check, an exchange without a raw completion, or a side the run
    does not find wrong on that check."""
    from replay import exactjson
    from replay.show import spec_from_options
    from replay.sql import connect

    run = Path(run_dir)
    if not (run / "exchanges.parquet").is_file():
        raise ReproError(f"{run}: not a run folder (no exchanges.parquet)")
    from replay.runner.runfolder import incomplete_stage

    try:
        stopped = incomplete_stage(run)
    except ValueError as exc:  # run.json not JSON
        raise ReproError(str(exc)) from None
    if stopped:  # its verdicts would be read from tables a command left half written (as replay query refuses it)
        raise ReproError(f"{run}: the command that wrote this run stopped during {stopped} (interrupted?): its tables are incomplete; "
                         "run it again to the end, then repro")
    from replay.matrix_vars import recorded_order

    recorded = recorded_order(run)
    if recorded is not None:  # a replay matrix run has named sides, no old and new (as replay show refuses it)
        raise ReproError(f"{run} is a replay matrix run (sides {', '.join(recorded[0])}): replay repro reads an audit's old and new sides; "
                         "audit the side that fails against the one that fixes it (replay audit --old ... --new ...) and repro that run")
    if check not in STREAM_CHECKS:
        raise ReproError(f"--check {check}: repro shrinks the stream checks only ({', '.join(STREAM_CHECKS)})")
    if side is not None and side not in ("old", "new"):
        raise ReproError(f"--side {side}: expected old or new")
    con = connect(run)
    try:
        found = _rows(con, "SELECT * FROM exchanges WHERE exchange_id = ?", [exchange_id])
        if not found:
            raise ReproError(f"no exchange {exchange_id!r} in {run}")
        ex = found[0]
        if ex.get("server_output_text") is None:
            raise ReproError(f"exchange {exchange_id!r} has no raw completion: nothing to replay")
        wrong = _rows(
            con,
            'SELECT chunking, old_wrong, new_wrong, old_deltas, new_deltas FROM verdict_pairs WHERE exchange_id = ? AND "check" = ? AND (old_wrong OR new_wrong)',
            [exchange_id, check],
        )
        if side is None:
            side = "new" if any(r["new_wrong"] for r in wrong) else "old"
        mine = [r for r in wrong if r[f"{side}_wrong"]]
        if fixed in ("old", "new") and fixed != side and any(not r[f"{fixed}_wrong"] for r in mine):
            mine = [r for r in mine if not r[f"{fixed}_wrong"]]
        if not mine:
            raise ReproError(f"the {side} side does not fail {check} on {exchange_id!r} in {run}: nothing to shrink")
        # the failing chunking with the fewest deltas (the whole-text parse counts as one, after a
        # streamed chunking of one delta: the parse row is picked only where no stream fails)
        pick = min(mine, key=lambda r: (max(r[f"{side}_deltas"] or 1, 1), r["chunking"] == "parse", r["chunking"] != "recorded", r["chunking"]))
        chunking = pick["chunking"]
        text = ex["server_output_text"]
        if chunking == "parse":
            deltas = [text]
        else:
            got = _rows(con, "SELECT delta_lengths FROM streams WHERE exchange_id = ? AND side = ? AND chunking = ?", [exchange_id, side, chunking])
            lengths = list(got[0]["delta_lengths"] or []) if got else []
            if sum(lengths) != len(text):
                raise ReproError(f"no stored cut of {chunking!r} for {exchange_id!r} (re-run `replay stream`)")
            deltas, pos = [], 0
            for n in lengths:
                deltas.append(text[pos : pos + n])
                pos += n
    finally:
        con.close()
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    options = meta.get("options") or {}
    spec = spec_from_options(options)
    keep = {}
    for s in ("old", "new"):  # the sides' interpreters, which spec_from_options leaves out
        keep.update({
            f"{s}_python": options.get(f"{s}_python"),
            f"{s}_pythonpath": tuple(options.get(f"{s}_pythonpath") or ()),
            f"{s}_parser": options.get(f"{s}_parser"),
        })
    spec = dataclasses.replace(spec, **keep)
    request = exactjson.loads(ex["request_json"]) if ex.get("request_json") else {}
    return Loaded(run, ex, request if isinstance(request, dict) else {}, side, check, chunking, deltas, spec, options)


def start_candidate(lo: Loaded) -> Candidate:
    """The case as the run holds it: the completion under the failing cut, the request's tools."""
    from replay.prepare import openai_tools

    tools = openai_tools(lo.ex.get("route"), lo.request.get("tools")) or []
    return Candidate("".join(lo.deltas), tuple(lo.deltas), tuple(tools))


def shrink(lo: Loaded, judge: Judge, seconds: float = DEFAULT_SECONDS) -> Shrunk:
    """Shrink the failure of ``lo`` with ``judge`` under ``seconds``. Raises :class:`ReproError`
    when the case as captured does not fail here (the side no longer reproduces it)."""
    first = start_candidate(lo)
    judge.keep_calls(first)
    if not judge.fails([first])[0]:
        raise ReproError(
            f"{lo.ex['exchange_id']}: the {lo.side} side ({lo.side_parser or 'built-in'}) does not fail {lo.check} "
            f"under the {lo.chunking} cut when replayed again: nothing to shrink"
        )
    budget = Budget(seconds)
    best = first
    marks = judge.markers()

    def tools_pass(c: Candidate) -> Candidate:
        def fails(lists: list[list[dict[str, Any]]]) -> list[bool]:
            return judge.fails([Candidate(c.text, c.deltas, tuple(t)) for t in lists])

        kept = ddmin(list(c.tools), fails, budget)
        return Candidate(c.text, c.deltas, tuple(kept))

    def facets_pass(c: Candidate) -> Candidate:
        """Inside each kept tool: its description and each parameter property, kept only where
        the failure needs them."""
        parts = []
        for i, t in enumerate(c.tools):
            fn = t.get("function") if isinstance(t, dict) else None
            if not isinstance(fn, dict):
                continue
            if "description" in fn:
                parts.append((i, "description", None))
            props = (fn.get("parameters") or {}).get("properties") if isinstance(fn.get("parameters"), dict) else None
            if isinstance(props, dict):
                parts.extend((i, "property", k) for k in props)
        if not parts:
            return c

        def build(kept: list[tuple[int, str, Any]]) -> Candidate:
            keep = set(kept)
            tools = []
            for i, t in enumerate(c.tools):
                fn = t.get("function") if isinstance(t, dict) else None
                if not isinstance(fn, dict):
                    tools.append(t)
                    continue
                fn = dict(fn)
                if "description" in fn and (i, "description", None) not in keep:
                    del fn["description"]
                params = fn.get("parameters")
                if isinstance(params, dict) and isinstance(params.get("properties"), dict):
                    props = {k: v for k, v in params["properties"].items() if (i, "property", k) in keep}
                    params = {**params, "properties": props}
                    if isinstance(params.get("required"), list):
                        params["required"] = [r for r in params["required"] if r in props]
                    fn["parameters"] = params
                tools.append({**t, "function": fn})
            return Candidate(c.text, c.deltas, tuple(tools))

        def fails(lists: list[list[tuple[int, str, Any]]]) -> list[bool]:
            return judge.fails([build(k) for k in lists])

        if fails([[]])[0]:
            return build([])
        return build(ddmin(parts, fails, budget))

    def text_pass(c: Candidate) -> Candidate:
        units = atoms(c.deltas, marks)

        def fails(lists: list[list[tuple[str, int]]]) -> list[bool]:
            return judge.fails([from_atoms(u, c.tools) for u in lists])

        return from_atoms(ddmin(units, fails, budget), c.tools)

    def cuts_pass(c: Candidate) -> Candidate:
        cuts, pos = [], 0
        for d in c.deltas[:-1]:
            pos += len(d)
            cuts.append(pos)

        def cand(cs: list[int]) -> Candidate:
            bounds = [0, *cs, len(c.text)]
            return Candidate(c.text, tuple(c.text[a:b] for a, b in zip(bounds, bounds[1:])), c.tools)

        def fails(lists: list[list[int]]) -> list[bool]:
            return judge.fails([cand(cs) for cs in lists])

        return cand(ddmin(cuts, fails, budget))

    for step in (tools_pass, text_pass, cuts_pass, text_pass, facets_pass):
        if not budget.left():
            break
        best = step(best)
    assert judge.fails([best])[0]
    messages = _messages(lo.request.get("messages"))
    return Shrunk(first, best, len(lo.request.get("messages") or ()), messages, judge.calls, budget.hit)


def _messages(messages: Any) -> list[dict[str, Any]]:
    """The history a stream check needs: none of it (the parser reads the completion and the
    tools; the prompt only says whether reasoning was open, and that is taken from the run), so
    only the last user message is kept, for the request to be a valid one."""
    users = [m for m in messages or () if isinstance(m, dict) and m.get("role") == "user"]
    return [users[-1]] if users else [{"role": "user", "content": ""}]


def mask(lo: Loaded, judge: Judge, shrunk: Shrunk) -> Shrunk:
    """``shrunk`` with its user text masked as the exemplars mask it (:func:`replay.mask.redact_text`:
    words of the completion's string values and prose, tool descriptions, the user message; the
    declared tool and parameter names, markers and call syntax kept). When the masked case no
    longer fails, the words whose masking makes it pass are kept as captured, one at a time (the
    first of the completion's words that alone restores the failure), and listed in
    ``exact_text``; when none does, the case is returned unmasked with ``exact_text`` = ``["*"]``."""
    import re

    from replay.mask import declared_names, redact_text, redact_tool

    c = shrunk.after
    keep = declared_names(list(c.tools))
    marks = judge.markers()

    def masked(extra: set[str]) -> Candidate:
        text = redact_text(c.text, keep | extra, marks) or ""
        assert len(text) == len(c.text)
        bounds, pos = [], 0
        for d in c.deltas:
            bounds.append((pos, pos + len(d)))
            pos += len(d)
        tools = tuple(redact_tool(t, keep | extra) for t in c.tools)
        return Candidate(text, tuple(text[a:b] for a, b in bounds), tools)

    msgs = [{**m, "content": redact_text(m["content"], keep)} if isinstance(m.get("content"), str) else m for m in shrunk.messages]
    full = masked(set())
    if judge.fails([full])[0]:
        return dataclasses.replace(shrunk, after=full, messages=msgs, masked=True)
    words = sorted(set(re.findall(r"[A-Za-z0-9_\u0080-\U0010ffff]+", c.text)) - keep)
    got = judge.fails([masked({w}) for w in words])
    for w, ok in zip(words, got):
        if ok:
            return dataclasses.replace(shrunk, after=masked({w}), messages=msgs, masked=True, exact_text=[w])
    return dataclasses.replace(shrunk, exact_text=["*"])
