"""Captured text made safe to show: the one place every terminal output of captured text goes
through (exchange ids, model names, tool names, content, file names, error details).

A capture is data from outside: a model name such as ``"\\x1b]0;pwned\\x07"`` (an xterm title) or
``"\\x1b[2J"`` (clear the screen) would, printed raw, act on the user's terminal; rich strips only
BEL, BS, VT, FF and CR from its Text and passes ESC through. :func:`visible` writes each control
character as a visible escape instead, and :func:`plain` wraps the result in a rich ``Text`` so
that rich markup in it (``[bold]`` in a model name) prints as it is, never as a style.

What counts as a control character: the C0 controls but newline and tab (U+0000-U+001F), DEL
(U+007F), the C1 controls (U+0080-U+009F; U+009B is a one-byte CSI on some terminals), and the
Unicode bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A-U+202E,
U+2066-U+2069), which reorder what a reader sees (CVE-2021-42574, "Trojan Source").

:class:`FitTable` is every table replay prints (the verdict and summary tables, ``replay query``,
``replay formats``): its cells go through :func:`visible`, and it fits the terminal's width
without cutting a value (a check name cut to ``ser…`` at 80 columns made the seven ``served:``
rows of the verdict table indistinguishable).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Iterator, Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["FitTable", "visible", "plain"]

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\r": "\\r", "\x1b": "\\x1b"}


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) <= 0xFF else f"\\u{ord(ch):04x}")


def visible(text: Any) -> str:
    """``text`` (a str, or anything, as ``str(text)``) with every control character (module
    docstring) written as a Python-style escape: ESC as ``\\x1b``, CR as ``\\r``, other bytes up to
    U+00FF as ``\\xNN``, bidi controls as ``\\uNNNN``; newlines and tabs kept. Returns a str of the
    same text when there is none (the common case costs one regex search). Raises nothing."""
    text = text if isinstance(text, str) else str(text)
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def plain(text: Any, style: str = "") -> Text:
    """``visible(text)`` as a rich ``Text`` (with ``style``, e.g. ``"bold"``): printed or put in a
    table cell, its square brackets are text, never rich markup. Raises nothing."""
    return Text(visible(text), style=style)


# --------------------------------------------------------------------------- tables that fit

_BREAK = re.compile(r"[^\s_-]*[\s_-]+|[^\s_-]+$")


def _parts(header: str) -> list[str]:
    """``"changed-wrong"`` -> ``["changed-", "wrong"]``: where a header may break (after ``-``,
    ``_`` or a space, which stays on the first line; a space is dropped there)."""
    return [p for p in _BREAK.findall(header) if p]


def _header_lines(header: str, width: int) -> str:
    """``header`` broken at its :func:`_parts` into lines of at most ``width`` cells."""
    lines: list[str] = []
    for part in _parts(header):
        if lines and cell_len(lines[-1].rstrip() + part.rstrip()) <= width:
            lines[-1] = lines[-1] + part
        else:
            lines.append(part)
    return "\n".join(line.rstrip() for line in lines)


class FitTable:
    """A table for the terminal that fits its width without cutting a value: a rich renderable.

    ``headers``: column names; ``rows``: one sequence of cell strings per row (as displayed: ``–``
    for null, numbers formatted); ``numeric``: per column, right-aligned; ``title``: shown above.
    Every string goes through :func:`visible`. The first column (the row's key: a check name, a
    count's name, an exchange id) and the numeric columns are never wrapped nor cut; the other
    columns wrap at spaces and fold a longer word (no text is ever replaced by ``…``).

    Layout, for the width ``w`` the console gives (``COLUMNS``, the terminal's): the rich table
    with each column as wide as its widest value and header when that fits in ``w``; else headers
    broken after ``-``, ``_`` or a space (``changed-`` over ``wrong``) and text columns at most as
    wide as their longest word (a longer word is folded), when that fits; else a stacked layout,
    one block per row: the key on its own line, then ``header value`` pairs, indented, as many to a
    line as fit. The widths come from rich's box-drawing table: 3 cells per column and one more.
    Raises nothing."""

    #: a text column is given at least this many cells (a longer word folds) before the layout stacks
    TEXT_MIN = 12

    def __init__(self, headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[bool] | None = None,
                 title: str | None = None) -> None:
        self.headers = [visible(h) for h in headers]
        self.rows = [[visible(c) for c in row] for row in rows]
        self.numeric = list(numeric) if numeric is not None else [False] * len(self.headers)
        self.title = visible(title) if title is not None else None

    def _fixed(self, j: int) -> bool:
        """Whether column ``j`` is never wrapped (the key and numeric columns)."""
        return j == 0 or self.numeric[j]

    def widths(self, width: int) -> list[int] | None:
        """Column widths (cells, without padding) that fit ``width``, or None when only the
        stacked layout does."""
        n = len(self.headers)
        if not n:
            return []
        room = width - (3 * n + 1)
        want, need = [], []
        for j, head in enumerate(self.headers):
            cells = [row[j] for row in self.rows]
            full = max((cell_len(line) for c in cells for line in c.split("\n")), default=0)
            want.append(max(full, cell_len(head), 1))
            if self._fixed(j):
                least = full
            else:
                longest_word = max((cell_len(w) for c in cells for w in c.split()), default=0)
                least = min(longest_word, max(self.TEXT_MIN, 1))
            need.append(max(least, max((cell_len(p.rstrip()) for p in _parts(head)), default=1), 1))
        if sum(need) > room:
            return None
        got = list(need)
        spare = room - sum(got)
        # the room left shared evenly among the columns not yet whole (each up to its want), so a
        # column that needs little to be whole is whole and the widest ones wrap
        while spare > 0:
            short = sorted((j for j in range(n) if got[j] < want[j]), key=lambda j: want[j] - got[j])
            if not short:
                break
            for k, j in enumerate(short):
                extra = min(want[j] - got[j], max(spare // (len(short) - k), 1), spare)
                got[j] += extra
                spare -= extra
        return got

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        widths = self.widths(width)
        if widths is not None:
            yield self._table(widths)
            return
        yield from self._stacked(console, width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, options.max_width)

    def _table(self, widths: list[int]) -> Table:
        title = Text(self.title) if self.title is not None else None
        out = Table(title=title, title_justify="left", header_style="bold")
        for j, (head, w) in enumerate(zip(self.headers, widths)):
            out.add_column(Text(head if cell_len(head) <= w else _header_lines(head, w)), width=w,
                           justify="right" if self.numeric[j] else "left", no_wrap=self._fixed(j), overflow="fold")
        for row in self.rows:
            out.add_row(*(Text(c) for c in row))
        return out

    def _stacked(self, console: Console, width: int) -> Iterator[Text]:
        if self.title is not None:
            yield Text(self.title, style="italic", overflow="fold")
        indent = "  "
        room = max(width - len(indent), 1)
        for row in self.rows:
            yield Text(row[0] if row else "", style="bold", overflow="fold")
            line = ""
            pairs = [f"{h} {c}" for h, c in zip(self.headers[1:], row[1:])]
            lines: list[str] = []
            for pair in pairs:
                if line and cell_len(line) + 2 + cell_len(pair) <= room:
                    line += "  " + pair
                else:
                    if line:
                        lines.append(line)
                    line = pair
            if line:
                lines.append(line)
            for text in lines:
                t = Text(text, overflow="fold")
                # a pair longer than the line wraps (at spaces, else folded), each line indented
                for piece in t.wrap(console, room):
                    yield Text(indent) + piece
