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

#: The checks of the verdict table, in its row order (``queries/verdicts.sql``).
CHECKS: tuple[str, ...] = (
    "null-leak",
    "prompt-divergence",
    "render-failure",
    "replay-error",
    "dropped-call",
    "non-json-join",
    "argument-mismatch",
    "content-leak",
)
#: The verdicts, in the table's column order.
VERDICTS: tuple[str, ...] = ("fixed", "broken", "same-ok", "still-wrong", "changed-wrong")

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
    """Parse ``VERDICT``, ``VERDICT>N``, ``CHECK:VERDICT`` or ``CHECK:VERDICT>N`` (N defaults to 0).

    ``broken`` fails when any check has a broken exchange; ``dropped-call:broken>0`` when that check
    has one; ``null-leak:still-wrong>10`` when more than 10 exchanges still leak. ``unreliable`` is
    accepted as a verdict (the table's column). Raises :class:`FailOnError` naming the valid
    checks and verdicts.
    """
    m = _EXPR.match(expr or "")
    if not m:
        raise FailOnError(f"--fail-on {expr!r}: expected VERDICT, CHECK:VERDICT or CHECK:VERDICT>N (e.g. broken, dropped-call:broken>0)")
    check, verdict, limit = m.group("check"), m.group("verdict"), int(m.group("limit") or 0)
    if check is not None and check not in CHECKS:
        raise FailOnError(f"--fail-on {expr!r}: unknown check {check!r}; checks: {', '.join(CHECKS)}")
    if verdict not in VERDICTS + ("unreliable",):
        raise FailOnError(f"--fail-on {expr!r}: unknown verdict {verdict!r}; verdicts: {', '.join(VERDICTS)}, unreliable")
    return FailOn(check=check, verdict=verdict, limit=limit, text=expr.strip())


def tripped(gates: Iterable[FailOn], verdicts: pa.Table) -> list[str]:
    """The gates that hold on a ``verdicts`` query result, each as a line naming what tripped
    (``--fail-on dropped-call:broken>0: dropped-call has 2 broken exchanges``); empty when none."""
    rows = {r["check"]: r for r in verdicts.to_pylist()}
    out = []
    for g in gates:
        for check in [g.check] if g.check else list(rows):
            n = (rows.get(check) or {}).get(g.verdict) or 0
            if n > g.limit:
                out.append(f"--fail-on {g.text}: {check} has {n:,} {g.verdict} exchange{'s' if n != 1 else ''} (limit {g.limit:,})")
    return out
