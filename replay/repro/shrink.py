"""Shrinking a failing case: delta debugging (ddmin) over the completion, the tools and the cuts.

Zeller and Hildebrandt's ddmin ("Simplifying and Isolating Failure-Inducing Input", IEEE TSE
2002): split the input into ``n`` parts, keep a part or a complement that still fails, else
double ``n``; the result is 1-minimal (removing any one remaining unit makes the failure go away)
when the time bound allows it to finish. Every round's candidates are judged as one batch
(:meth:`replay.repro.judge.Judge.fails`), and the first failing one in a fixed order is kept, so
the result depends only on the input and the judge.

The units: for the completion, its *atoms* (each family marker whole, :func:`atoms`, else one
char), each remembering the delta it came in, so that the deltas of a shrunk text are the kept
atoms grouped by their original delta (the failing cut kept); for the chunking, the cut points
(fewer cuts, fewer deltas); for the tools, the request's tool declarations.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from replay.repro.judge import Candidate

T = TypeVar("T")

__all__ = ["atoms", "from_atoms", "ddmin", "Budget"]


class Budget:
    """A wall-clock bound (``seconds``, monotonic) shared by the shrinking passes."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds
        self.hit = False

    def left(self) -> bool:
        if time.monotonic() >= self.end:
            self.hit = True
        return not self.hit


def atoms(deltas: Sequence[str], markers: Sequence[str]) -> list[tuple[str, int]]:
    """The completion ``"".join(deltas)`` as ``(atom, delta index)`` pairs: each occurrence of a
    marker (longest first) that lies inside one delta is one atom, every other char is one."""
    marks = sorted({m for m in markers if m}, key=len, reverse=True)
    out: list[tuple[str, int]] = []
    for k, d in enumerate(deltas):
        i = 0
        while i < len(d):
            m = next((m for m in marks if d.startswith(m, i)), None)
            if m is not None:
                out.append((m, k))
                i += len(m)
            else:
                out.append((d[i], k))
                i += 1
    return out


def from_atoms(kept: Sequence[tuple[str, int]], tools: Sequence[dict[str, Any]]) -> Candidate:
    """The candidate whose text is the kept atoms and whose deltas group them by their delta."""
    deltas: list[str] = []
    last = None
    for a, k in kept:
        if k == last:
            deltas[-1] += a
        else:
            deltas.append(a)
            last = k
    return Candidate("".join(deltas), tuple(deltas), tuple(tools))


def ddmin(items: list[T], fails: Callable[[list[list[T]]], list[bool]], budget: Budget) -> list[T]:
    """A 1-minimal sublist of ``items`` (order kept) for which ``fails`` holds, given that it holds
    for ``items``; stops early, returning the smallest failing list so far, when ``budget`` runs
    out. ``fails`` judges a batch of lists at once."""
    n = 2
    while len(items) >= 2 and budget.left():
        n = min(n, len(items))
        size = len(items) / n
        parts = [items[round(i * size) : round((i + 1) * size)] for i in range(n)]
        subsets = [p for p in parts if p]
        complements = [items[: round(i * size)] + items[round((i + 1) * size) :] for i in range(n)] if n > 2 else []
        got = fails(subsets + complements)
        hit = next((i for i, ok in enumerate(got) if ok), None)
        if hit is not None and hit < len(subsets):
            items, n = subsets[hit], 2
        elif hit is not None:
            items, n = complements[hit - len(subsets)], max(n - 1, 2)
        elif n < len(items):
            n = min(2 * n, len(items))
        else:
            break
    if len(items) == 1 and budget.left() and fails([[]])[0]:
        return []
    return items
