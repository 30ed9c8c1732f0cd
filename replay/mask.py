"""Masking of message text for exemplars and ``replay show --mask``: structure, lengths, tool and
parameter names and call syntax kept, every user word masked (:func:`redact_text`,
:func:`redact_tool`, :func:`declared_names`).

Used by the report's exemplars (:mod:`replay.report.exemplars`) and by :mod:`replay.show`; it
imports nothing of replay, so any module may use it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Iterable

#: The words of the call syntaxes (Hermes/Mistral ``name``/``arguments``, Llama 3 ``parameters``,
#: Qwen3-Coder/Seed-OSS ``<function=…>``/``<parameter=…>``, DSML/MiniMax ``invoke`` and
#: ``string="true"``, Harmony channels and ``to=functions.…``/``json``, Gemma ``call:``, Kimi
#: ``functions.``) and the JSON literals. :func:`redact_text` keeps one only where it stands in the
#: syntax (:func:`_structural_at`), never in prose: "the arguments are null" is masked whole.
STRUCTURAL_WORDS = frozenset(
    "name arguments parameters parameter function functions type true false null invoke call string "
    "commentary analysis final json assistant to constrain tool_call tool_calls function_calls python_tag think".split()
)
_LITERALS = frozenset(("true", "false", "null"))
_QUOTE = re.compile(r'(?<!\\)"')

_WORD = re.compile(r"\\u[0-9a-fA-F]{4}|\\.|[A-Za-z0-9_\u0080-\U0010ffff]+", re.S)
_NUMBER = re.compile(r"[0-9]+(?:[eE][0-9]*)?")


def _mask(word: str) -> str:
    if _NUMBER.fullmatch(word):  # 1 then 0s: no leading zero, so a JSON number stays one
        return re.sub(r"[0-9]+", lambda m: "1" + "0" * (len(m.group(0)) - 1), word)
    return "x" * len(word)


def _structural_at(text: str, start: int, end: int, after_marker: bool) -> bool:
    """Whether the structural word ``text[start:end]`` stands in a call syntax (kept) rather than in
    prose or inside a string value (masked). Syntax positions, from the families' formats:

    - right after a family marker (``<|channel|>commentary``, ``<|constrain|>json``) or after
      ``<``, ``</`` or ``=`` (``<function=``, ``</parameter>``, ``to=functions``);
    - right before ``=`` (``to=``, ``name="``), or before ``.`` or ``:`` that a name follows
      without a space (``functions.read``, Gemma ``call:read``);
    - a quoted JSON key: ``"arguments"`` followed by ``:``;
    - a JSON literal (``true``, ``false``, ``null``) as a bare token after ``:``, ``[`` or ``,`` and
      before ``,``, ``}`` or ``]`` inside an open ``{`` or ``[``, or as a quoted attribute value
      (``string="true"``).
    """
    word = text[start:end]
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    follows = text[end + 1] if end + 1 < len(text) else ""
    if (after_marker and start == 0) or before in ("<", "=") or text[max(0, start - 2) : start] == "</":
        return True
    if before == "." and start >= 2 and (text[start - 2].isalnum() or text[start - 2] == "_"):
        return True  # functions.read: the name after the namespace
    if after == "=" or (after in (".", ":") and follows and (follows.isalnum() or follows == "_")):
        return True  # to=, name=", functions.read, call:read; not a sentence's "... null." or "null: x"
    if before == '"' and after == '"':
        rest = text[end + 1 :].lstrip()
        if rest.startswith(":"):
            return True
        if word in _LITERALS and text[max(0, start - 2) : start] == '="':
            return True
        return False
    if word in _LITERALS and before != '"':
        prev = text[:start].rstrip()[-1:]
        nxt = text[end:].lstrip()[:1]
        if not (prev in (":", "[", ",") and nxt in (",", "}", "]")):
            return False
        head = text[:start]  # inside an open JSON object or array, not a prose list "a, null, b",
        if len(_QUOTE.findall(head)) % 2:  # and not inside a string value "a, null, b"
            return False
        return head.count("{") + head.count("[") > head.count("}") + head.count("]")
    return False


def redact_text(text: str | None, keep: Iterable[str] = (), markers: Iterable[str] = ()) -> str | None:
    """``text`` with its message text masked, length and structure kept (chars).

    Every run of letters, digits, ``_`` and non-ASCII chars is replaced by as many ``x`` (a number
    by ``1`` and ``0``s, an exponent's ``e`` kept), except the words in ``keep`` (the request's tool
    and parameter names) and a word of :data:`STRUCTURAL_WORDS` where it stands in a call syntax
    or is a JSON literal (:func:`_structural_at`); the same word in prose or inside a string value
    (``"the arguments are null"``, ``"null"``) is masked. ``markers`` (the family's special tokens)
    are kept whole; a JSON escape ``\\n`` is kept and ``\\uXXXX`` becomes ``\\u0078``. Punctuation and
    whitespace are kept, so JSON stays JSON and a chunking's cut positions stay valid: the redacted
    deltas are the redacted completion cut at the same offsets. None stays None.
    """
    if text is None:
        return None
    kept = set(keep)
    marks = sorted({m for m in markers if m}, key=len, reverse=True)
    out: list[str] = []
    pos = 0
    spans: list[tuple[int, int]] = []
    if marks:
        pattern = re.compile("|".join(re.escape(m) for m in marks))
        spans = [(m.start(), m.end()) for m in pattern.finditer(text)]

    def plain(segment: str, after_marker: bool) -> str:
        def sub(m: re.Match[str]) -> str:
            w = m.group(0)
            if w.startswith("\\u"):
                return "\\u0078"
            if w.startswith("\\"):
                return w
            if w in kept or (w in STRUCTURAL_WORDS and _structural_at(segment, m.start(), m.end(), after_marker)):
                return w
            return _mask(w)

        return _WORD.sub(sub, segment)

    for start, end in spans:
        out.append(plain(text[pos:start], bool(out)))
        out.append(text[start:end])
        pos = end
    out.append(plain(text[pos:], bool(out)))
    return "".join(out)


#: Keys of a tool declaration whose values are free text or example data, masked by :func:`redact_tool`.
TEXT_KEYS = frozenset({"description", "title", "examples", "example", "default", "enum", "const", "pattern"})


def redact_tool(node: Any, keep: Iterable[str] = ()) -> Any:
    """A tool declaration (any JSON value) with the strings under :data:`TEXT_KEYS` masked by
    :func:`redact_text` (names, types, property names and the schema's shape kept)."""
    kept = set(keep)

    def walk(value: Any, masked: bool) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, masked or k in TEXT_KEYS) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, masked) for v in value]
        if isinstance(value, str) and masked:
            return redact_text(value, kept)
        return value

    return walk(node, False)


def text_sha256(text: str | None) -> str | None:
    """SHA-256 hex of ``text`` as UTF-8 (lone surrogates kept as they are); None for None."""
    return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def declared_names(tools: Any) -> set[str]:
    """Tool names and every property name of their parameter schemas (recursively), from a request's
    ``tools`` in any route's form: the words :func:`redact_text` keeps."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("name"), str):
                names.add(node["name"])
            props = node.get("properties")
            if isinstance(props, dict):
                names.update(k for k in props if isinstance(k, str))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(tools)
    return names
