"""Llama 3.1 / 3.2 / 3.3 JSON tool calls: bare ``{"name": ..., "parameters": {...}}`` objects.

Output syntax (tool-call-formats.md §3): a call is a bare JSON object ``{"name": NAME,
"parameters": {...}}`` (``"arguments"`` is accepted too; when both are present ``arguments`` wins,
as in :func:`replay.parsers.hermes.call_from_object`), optionally preceded by the
``<|python_tag|>`` special token. vLLM (``Llama3JsonToolParser``) and SGLang (``Llama32Detector``)
accept several objects separated by ``;`` (vLLM's streaming path assumes exactly ``"; "``);
SGLang also accepts a JSON array of call objects. The official 3.1/3.3 template allows one call
per turn. Nothing marks the end of a call: the call ends where its JSON object ends.

Checked against public implementations (facts only): vLLM's whole-text parse ``raw_decode``s every
``{`` and returns the whole output as content (no calls) when any decoded object is not a call;
its streaming path only enters tool mode when the text *starts* with ``<|python_tag|>`` or ``{``.
SGLang's detector treats text before the first ``<|python_tag|>`` as normal text, decodes the rest
as an object or array, else repeatedly ``raw_decode``s stepping over ``;``. llama.cpp additionally
parses the Llama 3.1 *built-in* tool syntax ``<|python_tag|>NAME.call(k="v")``; vLLM and SGLang do
not, and neither does this module (that text is content).

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking):

* An **item** is JSON whitespace then one JSON value, read as ``json.JSONDecoder().raw_decode``
  reads it (string-aware). It is a call item when the value is a call object (a dict with a string
  ``name`` and a dict ``arguments``, else a dict ``parameters``) or a non-empty array of call
  objects (one call each, in order). A value that starts with anything but ``{`` or ``[``, does
  not decode, is nested deeper than :data:`~replay.parsers._jsonscan.MAX_DEPTH`, or is not of that
  shape is not a call item. The call (or calls) end at the closing
  ``}`` / ``]`` of the value: streaming sends them as soon as it arrives.
* Items are tried at three places only: (1) at the start of the output, when its first
  non-whitespace character is ``{`` or ``[`` (the leading whitespace stays content); (2) right
  after every ``<|python_tag|>`` (the tag and the whitespace after it belong to the call item and
  are dropped; when no call item follows, the tag is content, verbatim); (3) right after a call
  item, across a separator of optional whitespace, an optional ``;``, optional whitespace (the
  separator is dropped when a call item follows it; newline-separated or adjacent objects are
  accepted too, vLLM's 2-character skip is not assumed).
* Everything else is content, verbatim: text before the first call, text after the last call of a
  chain (from the character right after its ``}``/``]``, separators included), and every item
  that is not a call item (from where it was tried). Such text is read on for ``<|python_tag|>``
  (so a tag inside a failed item's string starts a new attempt). A ``{`` in the middle of prose
  is never a call (vLLM's whole-text parse would try it; its streaming would not).
* ``<|eot_id|>`` / ``<|eom_id|>`` (and ``<|end_of_text|>``, Llama 4's ``<|eot|>`` / ``<|eom|>``)
  are end-of-turn tokens a server strips: both paths remove them from the raw text first
  (``end_tokens``), so a captured one is not content.
* Unterminated output: an item whose JSON is cut off by the end of the stream is not a call; its
  text is content. A separator at the end of the stream is content.

Streaming: the engine of :class:`~replay.parsers._family.GrammarParser` over the same grammar
(:meth:`Llama3JsonParser.read`): the item at the start of the output is its :data:`HEAD` block,
the item after a call item its :data:`CHAIN` block, the item after ``<|python_tag|>`` a block of
that marker. Outside items, text is emitted as soon as it cannot be the start of
``<|python_tag|>``. An item's value is scanned once, incrementally
(:class:`~replay.parsers._family.ValueEndWake`), and read when it completes (or cannot be a value):
its calls are then sent in one tool-call delta each (name once, arguments exactly the whole-text
parse's ``json.dumps(..., ensure_ascii=False)``); a failed item's text is read on as prose.
``finish()`` decides a pending item and releases held-back text.

Choices where the upstream suites differ (tests/conformance, ``KNOWN`` in tests/test_conformance.py):

* SGLang's ``Llama32Detector`` retries at the next ``{`` after a malformed object
  (``{"name": "f", "parameters": {{"name": ...}}``); replay: a ``{`` in the middle of text is never
  a call (the rule above), so the whole text is content.
* The Llama 3.1 built-in tool syntax ``<|python_tag|>NAME.call(...)`` is read by llama.cpp only
  (not vLLM/SGLang ``llama3_json``); replay leaves it as content.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from replay.parsers._family import CHAIN, GrammarParser, ValueEndWake
from replay.parsers._jsonscan import MORE, JsonPrefix, decode_at, skip_ws
from replay.parsers.base import ToolCall
from replay.parsers.hermes import call_from_object

PYTHON_TAG = "<|python_tag|>"
EOT = "<|eot_id|>"
EOM = "<|eom_id|>"


def calls_from_value(value: Any) -> list[tuple[str, str]] | None:
    """The calls of one decoded item value, ``[(name, arguments JSON text), ...]``, or None.

    ``value``: a call object (one call) or a non-empty list of call objects (one call each); see
    :func:`replay.parsers.hermes.call_from_object`. Anything else -> None (not a call item).
    """
    if isinstance(value, dict):
        call = call_from_object(value)
        return None if call is None else [call]
    if isinstance(value, list) and value:
        calls = [call_from_object(v) for v in value]
        if all(c is not None for c in calls):
            return calls  # type: ignore[return-value]
    return None


def _decode_item(text: str, j: int, final: bool = True) -> tuple[list[tuple[str, str]], int] | None | bool:
    """The call item whose value starts at ``text[j]`` -> ``(calls, end index)``, or False when
    there is none there; None on a stream's prefix that cannot tell yet (cut off at ``j`` or
    inside the value)."""
    n = len(text)
    if j >= n:
        return False if final else None
    if text[j] not in "{[":
        return False
    try:
        value, k = decode_at(text, j)
    except json.JSONDecodeError:
        if not final and JsonPrefix().feed(text[j:]) == MORE:
            return None
        return False
    calls = calls_from_value(value)
    return False if calls is None else (calls, k)


class Llama3JsonParser(GrammarParser):
    """Tool parser for Llama 3.x bare-JSON tool calls (``llama3_json``).

    Mirrors vLLM ``Llama3JsonToolParser`` and SGLang ``Llama32Detector`` in syntax (objects with
    ``name`` and ``parameters``/``arguments``, optional ``<|python_tag|>``, ``;`` between calls,
    SGLang's JSON array). Deliberate differences, all in the module docstring: one non-call JSON
    object does not turn the whole output into content (vLLM), prose before a call is kept (vLLM
    drops it), leading whitespace does not disable tool parsing (vLLM streaming), a ``{`` in the
    middle of prose is not a call. ``tools`` is accepted and ignored (calls to undeclared tools are
    reported; the values are JSON, no schema typing). ``reasoning_open`` is accepted for a uniform
    constructor and ignored: Llama 3 has no reasoning section.
    """

    name: ClassVar[str] = "llama3_json"
    markers: ClassVar[tuple[str, ...]] = (PYTHON_TAG, EOT, EOM)
    end_tokens: ClassVar[tuple[str, ...]] = ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|eot|>", "<|eom|>")
    covers: ClassVar[str] = (
        "Llama 3.1 / 3.2 / 3.3 Instruct (and fine-tunes) with JSON tool calls; vLLM llama3_json / llama4_json, SGLang llama3"
    )
    STARTS = (PYTHON_TAG,)
    HEAD_BLOCK = True  # an item at the start of the output
    CHAIN_BLOCKS = True  # an item right after a call item, across "ws ; ws"

    def read(self, text: str, s: int, mark: str, final: bool) -> tuple[int, list[ToolCall] | None] | None:
        """The grammar: one item at the output's start (:data:`HEAD`), after ``<|python_tag|>`` and
        whitespace, or after a call item across the separator (:data:`CHAIN`) -> ``(end of the
        item, its calls)``; no item there -> the tag as content, or nothing (``(s, None)``); None
        on a stream's prefix that cannot tell yet."""
        if mark == PYTHON_TAG:
            j = skip_ws(text, s + len(mark))
        elif mark == CHAIN:
            j = skip_ws(text, s)
            if j < len(text) and text[j] == ";":
                j = skip_ws(text, j + 1)
        else:
            j = s
        item = _decode_item(text, j, final)
        if item is None:
            return None
        if item is False:
            return (s + len(mark) if mark == PYTHON_TAG else s), None
        calls, k = item
        return k, [ToolCall(n, a) for n, a in calls]

    def wake(self, mark: str) -> ValueEndWake:
        """An item is decided when its value completes or cannot be one (no end marker follows)."""
        seek = len(mark) if mark == PYTHON_TAG else 0
        return ValueEndWake((), seek, "{[", then_text=False, skip=" \t\n\r;" if mark == CHAIN else " \t\n\r")
