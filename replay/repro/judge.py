"""Judge candidate cases of one exchange exactly as the audit judges them (``replay repro``).

A :class:`Judge` holds one side of a run (its parser spec, in its own interpreter: a worker of
:mod:`replay.sides` when the side ran in another one) against the run's reference parser, and
answers, for a batch of candidate cases (completion text, deltas, tools), which of them still
fail the check on that side while the reference passes it. Each candidate goes through the
re-stream stage's own functions (:func:`replay.stages.stream.plan_stream`, :func:`replay.stages.stream.
finish_stream`, :func:`replay.judge.judge_side` through it) and the verdict SQL
(``queries/_verdict_pairs.sql`` with the check registry, :mod:`replay.checks`), so a kept
candidate is one the audit itself would count: the tested side sits in the ``old`` slot and the
reference parser, replayed under the same deltas, in the ``new`` slot; a candidate fails when the
verdict row of the check under the candidate's chunking (``recorded``: its own deltas, or
``parse`` for the whole-text checks) has ``old_wrong`` and not ``new_wrong``. With ``--fixed
old|new`` the fixed side takes the ``new`` slot instead: the candidate must then pass there too.
In both cases the reference's whole-text parse of the candidate must exist (the verdict row is
made only then) and keep the calls of the captured case (:meth:`Judge.keep_calls`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from replay import tables

__all__ = ["Candidate", "Judge", "ReproError", "STREAM_CHECKS"]

#: The checks ``repro`` shrinks: those judged per chunking on a replay (scope ``stream``).
from replay.repro import STREAM_CHECKS  # noqa: E402,F401  (part of this module's API)


class ReproError(ValueError):
    """A repro that cannot be made: no such exchange or check, a side the exchange does not fail,
    a test file that does not fail where the audit saw the failure. The message says which."""


@dataclass(frozen=True)
class Candidate:
    """One candidate case: ``text`` (the raw completion), ``deltas`` (join to ``text``; the
    ``recorded`` chunking it is replayed under) and ``tools`` (OpenAI-form tool dicts)."""

    text: str
    deltas: tuple[str, ...]
    tools: tuple[dict[str, Any], ...]

    def key(self) -> str:
        return json.dumps([self.deltas, self.tools], sort_keys=True, ensure_ascii=False)


def _as_run_sides(message: str, side: str, fixed: str) -> str:
    """``message`` of an error of the judging config, its options (``--old-python PY``, the slot
    the tested ``side`` sits in; ``--new-...``, the ``fixed`` side's) said as the run's sides:
    ``the new side's python PY (as the run recorded it)``."""
    import re

    def sub(m: re.Match[str]) -> str:
        role = side if m.group(1) == "old" else fixed
        return f"the {role} side's " + (m.group(2).replace("-", "_") if m.group(2) else "value")

    text = re.sub(r"--(old|new)(?:-([a-z][a-z-]*))?\b", sub, message)
    return text.replace(":", " (as the run recorded it):", 1) if text != message else text


class Judge:
    """Judges :class:`Candidate` batches for ``check`` on one side of a run.

    ``spec``: the run's :class:`replay.runspec.RunSpec` (from ``run.json``); ``side``: ``old`` or
    ``new`` (the side judged); ``ex``: the exchange's ``exchanges`` row (model, route, prompt,
    finish_reason); ``chunking``: ``parse`` for a whole-text check (``semantic-diff``) or with
    ``whole`` (the run's failing row is the side's whole-text parse), else ``recorded``; ``fixed``: ``old`` or ``new`` puts that side of the run (in its own interpreter)
    in the ``new`` slot instead of the reference parser, so a candidate counts only when the fixed
    side passes it too (a shrink must not slip into a case the fix does not fix either).
    Raises :class:`ReproError` for a check that is not a stream check, and for a side whose
    worker does not start or whose spec does not resolve (what :func:`replay.sides.open_sides`
    raises, its option said as the run's side: the tested side sits in the old slot here)."""

    def __init__(self, spec: Any, side: str, check: str, ex: dict[str, Any], *, fixed: str | None = None, timeout: float | None = None,
                 whole: bool = False) -> None:
        from replay.stages.context import ParserResolver
        from replay.runspec import build_config

        if check not in STREAM_CHECKS:
            raise ReproError(f"--check {check}: repro shrinks the stream checks only ({', '.join(STREAM_CHECKS)})")
        self.check = check
        # the whole-text parse's row when the check is judged there (semantic-diff), or when the
        # failure the run found is in the side's whole-text parse only (``whole``: a dropped call
        # or leaked markup of extract_tool_calls that no streamed chunking shows)
        self.chunking = "parse" if check == "semantic-diff" or whole else "recorded"
        self.ex = ex
        s = dataclasses.asdict(spec)
        tested = {
            "old_parser": s.get(f"{side}_parser"),
            "old_python": s.get(f"{side}_python"),
            "old_pythonpath": tuple(s.get(f"{side}_pythonpath") or ()),
            "old_serializer": s.get(f"{side}_serializer") or "as-sent",
        }
        if fixed in ("old", "new"):  # the fixed side must pass each candidate: it sits in the new slot
            other = {
                "new_parser": s.get(f"{fixed}_parser"),
                "new_python": s.get(f"{fixed}_python"),
                "new_pythonpath": tuple(s.get(f"{fixed}_pythonpath") or ()),
                "new_serializer": s.get(f"{fixed}_serializer") or "as-sent",
            }
        else:
            other = {"new_parser": spec.reference_parser, "new_python": None, "new_pythonpath": ()}
        run = dataclasses.replace(
            spec,
            **tested,
            **other,
            old_render_in="audit",
            new_render_in="audit",
            chunkings=("recorded",),
            **({"replay_timeout": timeout} if timeout is not None else {}),
        )
        try:  # the run's sides as its run.json records them: an interpreter since moved or deleted fails here
            self.cfg = build_config(run)
            self.resolver = ParserResolver(self.cfg)
        except ValueError as exc:  # replay.sides.SideError, a spec that does not resolve: its option said as the run's side
            raise ReproError(_as_run_sides(str(exc), side, fixed if fixed in ("old", "new") else "reference")) from None
        self.calls = 0  # candidates judged (not counting the cache)
        self.undeclared: set[str] = set()
        #: the names of the reference's calls every candidate must keep (set by :meth:`keep_calls`)
        self.names: tuple[str, ...] | None = None
        self._cache: dict[str, bool] = {}

    # --- the side's parser as the resolver has it -------------------------------------------
    def family(self) -> str | None:
        return self.resolver.family(self.ex.get("model"))

    def markers(self) -> tuple[str, ...]:
        """The markers a delta may not cut: the reference family's and the tested side's own."""
        fam = self.family()
        if fam is None:
            return ()
        return self.resolver.sides(fam).cut_markers("old")

    def close(self) -> None:
        from replay.sides import close_sides

        close_sides(self.cfg)

    def reference_parse(self, c: Candidate) -> Any:
        """The reference parser's whole-text parse of ``c`` (a ParseResult), or None when it
        raised or no family applies."""
        from replay.stages.stream import plan_stream

        return plan_stream(self._row(0, c), self.cfg, self.resolver).ref_parse

    def keep_calls(self, c: Candidate) -> tuple[str, ...]:
        """From now on a candidate counts only when the reference's whole-text parse of it has the
        calls of ``c``'s, by name and in order (the failure is about those calls: a shrink that
        leaves the reference fewer calls, or none, slips to another fault). Returns the names."""
        got = self.reference_parse(c)
        self.names = tuple(call.name for call in got.calls) if got is not None else ()
        self._cache.clear()
        return self.names

    # --- judging ------------------------------------------------------------------------------
    def _row(self, k: int, c: Candidate) -> dict[str, Any]:
        ex = {
            "exchange_id": f"c{k}",
            "route": self.ex.get("route"),
            "model": self.ex.get("model"),
            "server_output_text": c.text,
            "server_steps": list(c.deltas),
            "server_prompt": self.ex.get("server_prompt"),
            "served_finish_reason": self.ex.get("served_finish_reason"),
            "tools_json": json.dumps(list(c.tools), ensure_ascii=False),
        }
        return ex

    def rows(self, cands: list[Candidate]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The ``streams`` and ``calls`` rows of ``cands`` (exchange ids ``c0``, ``c1`` ...), the
        tested side as ``old`` and the reference parser as ``new``."""
        from replay.stages.stream import finish_stream, plan_stream, replay_from_worker, replay_item

        plans = [plan_stream(self._row(k, c), self.cfg, self.resolver) for k, c in enumerate(cands)]
        remote: list[dict[str, Any]] = [{} for _ in plans]
        for slot in ("old", "new"):
            worker = self.resolver.remote.remote(slot) if self.resolver.remote is not None else None
            if worker is None:
                continue
            todo = [(k, p) for k, p in enumerate(plans) if not p.done]
            items = [replay_item(p, getattr(p.sides, slot), p.chunks[slot]) for _, p in todo]
            if items:
                worker.submit("replay", items, [1 + len(it["chunkings"]) for it in items])
                for (k, p), answer in zip(todo, worker.collect()):
                    remote[k][slot] = replay_from_worker(answer, p.chunks[slot], "length" if p.truncated else None)
        streams: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        self.undeclared = set()
        for k, p in enumerate(plans):
            declared = {((t.get("function") or {}).get("name")) for t in cands[k].tools if isinstance(t, dict)}
            if p.ref_parse is not None and any(call.name not in declared for call in p.ref_parse.calls):
                self.undeclared.add(f"c{k}")
            if self.names is not None and (p.ref_parse is None or tuple(call.name for call in p.ref_parse.calls) != self.names):
                self.undeclared.add(f"c{k}")
            s, c = finish_stream(p, self.cfg, remote[k] or None)
            streams.extend(s)
            calls.extend(c)
        return streams, calls

    def verdicts(self, cands: list[Candidate]) -> list[dict[str, Any] | None]:
        """Per candidate, its verdict row of the check under the candidate's chunking
        (``verdict_pairs`` columns), or None when the check does not apply (the reference did not
        parse the text, or the chunking could not be cut), and None for a candidate whose
        reference parse calls a tool its tool list does not declare (a model calling an
        undeclared tool is another fault than the one being shrunk: dropping the declaration
        would slip to it) or whose reference calls are not those :meth:`keep_calls` fixed."""
        from replay.stages.rows import rows_table
        from replay.sql import connect_tables

        streams, calls = self.rows(cands)
        con = connect_tables({"streams": rows_table(streams, tables.STREAMS), "calls": rows_table(calls, tables.CALLS)})
        try:
            cur = con.execute(
                'SELECT * FROM verdict_pairs WHERE "check" = ? AND chunking = ?', [self.check, self.chunking]
            )
            names = [d[0] for d in cur.description]
            got = {r[0]: dict(zip(names, r)) for r in cur.fetchall()}
        finally:
            con.close()
        return [None if f"c{k}" in self.undeclared else got.get(f"c{k}") for k in range(len(cands))]

    def fails(self, cands: list[Candidate]) -> list[bool]:
        """Per candidate: the tested side is wrong on the check and the reference is not (cached
        by the candidate's deltas and tools)."""
        todo = [c for c in cands if c.key() not in self._cache]
        uniq = list({c.key(): c for c in todo}.values())
        if uniq:
            self.calls += len(uniq)
            for c, v in zip(uniq, self.verdicts(uniq)):
                self._cache[c.key()] = bool(v is not None and v["old_wrong"] and not v["new_wrong"])
        return [self._cache[c.key()] for c in cands]
