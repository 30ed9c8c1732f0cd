"""Verdicts: the checks and verdict names, ``--fail-on`` gates, and content leaks.

The counting lives in SQL (``queries/verdicts.sql``, ``verdict_exchanges.sql``, ``fidelity.sql``
and the views ``queries/_*.sql``); this module holds what the SQL needs computed where the rows
are made (:func:`markup_leak`) and the ``--fail-on`` expressions (:func:`parse_fail_on`,
:func:`tripped`, :func:`unjudged`). The verdict section of ``report.md`` and the exemplars are
in the report package (:mod:`replay.report`), the masking in :mod:`replay.mask`; this module
imports neither, nor the stages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa

from replay import checks as _checks

#: The checks of the old and new sides in the verdict table, in its row order (from the registry,
#: :data:`replay.checks.REGISTRY`: scopes ``render`` and ``stream``).
CHECKS: tuple[str, ...] = _checks.names("render", "stream")
#: The checks of the served side (rows ``served:CHECK`` of the verdict table, from the captured
#: streams and responses: the ``served_*`` columns of ``exchanges``), gated by ``served:CHECK>N``;
#: the registry's ``served`` scope without the ``served:`` prefix.
SERVED_CHECKS: tuple[str, ...] = tuple(n.split(":", 1)[1] for n in _checks.names("served"))
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
    if not content or content == reference_content:  # the same text: the same counts (every row whose content is the reference's)
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


def unmeasured(gates: Iterable[FailOn], verdicts: pa.Table) -> list[str]:
    """The gates that would read a count over nothing judged in a ``verdicts`` query result, each
    as a line saying which: a gate naming a check whose row judged no exchange (``exchanges`` 0,
    its counts null: ``served:name-repeat`` on a capture without a stream), or a gate without a
    check when no check of the old and new sides judged one. Such a gate would pass on a count
    nobody measured (issue #20); the rule a count is null when nothing was judged is
    ``queries/verdicts.sql``'s. Empty when every gate reads a measured count."""
    rows = {r["check"]: r for r in verdicts.to_pylist()}
    out = []
    for g in gates:
        checks = [g.check] if g.check else [c for c in rows if not c.startswith("served:")]
        if checks and all(not (rows.get(c) or {}).get("exchanges") for c in checks):
            what = g.check or "any check"
            scope = "exchanges with a captured response or stream it applies to" if (g.check or "").startswith("served:") else "exchanges judged"
            out.append(f"--fail-on {g.text}: nothing judged for {what}: no {scope} (its counts are null, not 0)")
    return out


#: The table a check's stage writes: render checks need ``renders``, stream checks ``streams``.
CHECK_TABLE: dict[str, str] = {
    c.name: {"render": "renders", "stream": "streams", "served": "exchanges"}[c.scope] for c in _checks.REGISTRY
}


def unjudged(gates: Iterable[FailOn], run_dir: Any) -> list[str]:
    """The gates naming a check (or, with no check, any check) whose stage never ran in the run
    folder ``run_dir`` (its ``renders.parquet`` or ``streams.parquet`` absent, as after
    ``replay ingest`` alone), each as a line saying which; empty when every gate can be judged.
    A gate there would read a count of 0 and pass without anything judged."""
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
