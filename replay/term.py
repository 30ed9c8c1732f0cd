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
"""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text

__all__ = ["visible", "plain"]

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
