"""gpt-oss Harmony: messages ``<|start|>HEADER<|message|>BODY<|end|>``; a call is a message to ``functions.NAME``.

Output syntax (tool-call-formats.md §10; openai/harmony ``docs/format.md``): the prompt ends with
``<|start|>assistant``, so the completion starts inside the first message's header, usually at
``<|channel|>``. A message is a header, ``<|message|>``, a body, and a terminator: ``<|end|>``,
``<|call|>`` (after a call; a stop token) or ``<|return|>`` (after the final answer; a stop token).
Later messages start with ``<|start|>`` and a role (``assistant``). The header holds the channel
(``<|channel|>analysis`` / ``commentary`` / ``final``), an optional recipient ``to=...`` (in the
role part, ``<|start|>assistant to=functions.f<|channel|>commentary``, or after the channel,
``<|channel|>commentary to=functions.f``) and an optional content type (``<|constrain|>json``,
or a bare word such as ``json``/``code``; the space before ``<|constrain|>`` may be missing). A
function call is a message whose recipient is ``functions.NAME`` with the JSON arguments as body:

    <|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary
    to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>

Facts checked against the public implementations (the doc's **[unconfirmed]** items and the
open questions of the brief):

* Commentary without a recipient is a user-visible preamble: vLLM's ``OpenAIToolParser`` returns
  it as content when there is no final message; SGLang's ``HarmonyParser`` (``harmony_parser.py``)
  buffers ``commentary`` bodies and emits those without a recipient as normal text. Here: content.
* A recipient on the ``analysis`` channel is accepted (llama.cpp's gpt-oss tests parse
  ``<|channel|>analysis to=functions.f<|message|>{...}`` as a call; vLLM keys on the recipient, not
  the channel). ``<|constrain|>json`` is not required (vLLM; SGLang's regex requires it).
* SGLang treats ``<|start|>`` and ``<|channel|>`` inside a body as an implicit close of the message;
  so does this module (for every marker, see below).
* Several calls in one completion happen only when the server does not stop on ``<|call|>``; they
  are parsed as consecutive messages. [how common remains unconfirmed]

Reference behaviour (this module's definition, shared by the whole-text parse and the streaming
parser; the tests check that they agree under every chunking). The seven markers ``<|start|>``,
``<|end|>``, ``<|message|>``, ``<|channel|>``, ``<|constrain|>``, ``<|return|>``, ``<|call|>`` are
special tokens: they are recognised anywhere, also inside a JSON string (a model cannot write a
special token inside a string; ``openai_harmony`` ends the message there too).

* Header: the text from the start of a message up to ``<|message|>``, markers included. A
  ``<|start|>`` or a terminator (``<|end|>``, ``<|call|>``, ``<|return|>``) seen in a header drops
  the header so far and starts a new one (after ``<|start|>`` the header has a role part). Header
  text is framing: it never reaches content.
* Classification of a header: the recipient is the word after the last ``to=`` (up to whitespace
  or ``<|``), ignored when it is ``assistant``; the channel is the first word after the last
  ``<|channel|>`` (so ``<|channel|>commentary to=assistant<|channel|>analysis`` is analysis); the
  role is the first word of a header opened by ``<|start|>`` (unless it is the ``to=`` word). Then,
  in this order: role other than ``assistant`` (user, system, developer, a tool's response such as
  ``functions.f`` or ``browser.search``) -> dropped (not model output); recipient ``functions.NAME``
  (NAME non-empty; the whole rest, dots kept, as vLLM; SGLang keeps only the last dotted segment)
  -> call; any other recipient (built-in tools ``browser.*``, ``python``, ``container.exec``) ->
  dropped (the server runs them; llama.cpp's tests expect neither content nor reasoning for them);
  channel ``analysis`` -> reasoning; anything else (``final``, ``commentary``, unknown, no
  channel) -> content.
* Body: the text after ``<|message|>`` up to the next marker or the end of the text. A terminator
  ends the message; any other marker ends it too (implicit close) and begins the next header
  (``<|channel|>``/``<|constrain|>`` belong to that header, ``<|message|>`` completes an empty one).
  Reasoning and content bodies are appended verbatim, in order (several final/commentary
  messages are concatenated, where vLLM keeps only the last final message).
* A call body is a call when it is JSON whitespace, one JSON object (as ``json.JSONDecoder()
  .raw_decode`` reads it) and JSON whitespace; whatever ends it (``<|call|>``, another marker, or the
  end of the text). A body that is only whitespace and ended by ``<|call|>`` is a call with no
  arguments (``{}``). Arguments are ``json.dumps(obj, ensure_ascii=False)`` (vLLM re-serializes the
  same way). Any other call body (invalid or cut-off JSON, a non-object, a value nested deeper
  than :data:`~replay.parsers._jsonscan.MAX_DEPTH`) is content, verbatim
  (vLLM would keep the raw text as the arguments; SGLang drops the call): nothing is lost.
* Text outside every message envelope is content, verbatim (README content rules): a header
  never completed by ``<|message|>`` that no ``<|start|>`` opened and that holds no
  ``<|channel|>``/``<|constrain|>`` -- text at the start of the output or after a terminator, up to
  the next ``<|start|>``, terminator or the end of the text. ``I need both. <|start|>assistant...
  <|call|> Done.`` gives content ``I need both.  Done.`` (both spaces kept). SGLang's
  ``HarmonyParser`` (``CanonicalStrategy``) makes each text token outside a block a ``normal``
  event and streams it as it is (its whole-text ``detect_and_parse`` joins the events with a space
  and strips the ends; replay keeps the text as the stream gives it). Text followed by
  ``<|channel|>``/``<|constrain|>``/``<|message|>`` is a header (llama.cpp's tests read
  `` to=functions.f<|channel|>analysis<|message|>`` at the start as a recipient), and a header
  opened by ``<|start|>`` and never completed (the ``<|start|>assistant`` after the last message)
  is framing, dropped. An output with no marker at all is therefore all content.
* A call cut off by the end of the output is a call when its body is one complete JSON object
  (the exception to the rule of the other families, README content rules): ``<|call|>`` is a
  stop token that servers strip from the text they log and return, so a captured completion ends
  its last call without it. llama.cpp's gpt-oss tests parse such text as a call; vLLM's
  ``OpenAIToolParser`` parses token ids, which carry the stop token. (SGLang's text-level
  ``HarmonyParser`` holds a commentary block without ``<|call|>``/``<|end|>`` and never reports it.)
  A body cut inside its JSON is content.
* ``reasoning_open=True``: the prompt already opened an analysis message
  (``...<|channel|>analysis<|message|>``), so the output starts in a reasoning body.

Not handled: captures decoded with ``skip_special_tokens=True`` (``assistantfinal...``, the
markers are gone): such text has no marker and is all content.

The grammar (:func:`read_message`, one function for both paths, on the engine of
:class:`~replay.parsers._family.GrammarParser`): every marker opens a block. A terminator or
``<|start|>`` is framing and names the header that follows (:data:`HEADER`, :data:`HEADER_STARTED`);
a header, read up to ``<|message|>`` (or dropped at a ``<|start|>``/terminator), names what its
body is: a region streamed as reasoning, content or dropped up to the next marker
(``REGIONS``), or a call body (:data:`CALL_BODY` + NAME), a block decided at the next marker. So
reasoning and content bodies stream as they arrive, headers and call bodies wait for the marker
that decides them, and a call is sent in one tool-call delta when its message ends: the name
once, the arguments exactly the whole-text string.

End token ``<|endoftext|>`` (``end_tokens``) is removed from the raw text in both paths; ``<|return|>``
and ``<|call|>`` (gpt-oss's stop tokens) are read by the message grammar above and never reach content.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar

from replay.parsers._family import CONTENT, DROP, REASONING, GrammarParser, MarkerWake, Region
from replay.parsers._jsonscan import decode_at, dumps_arguments, skip_ws
from replay.parsers._markers import first_marker
from replay.parsers.base import ToolCall

START = "<|start|>"
END = "<|end|>"
MESSAGE = "<|message|>"
CHANNEL = "<|channel|>"
CONSTRAIN = "<|constrain|>"
RETURN = "<|return|>"
CALL = "<|call|>"

MARKERS = (START, END, MESSAGE, CHANNEL, CONSTRAIN, RETURN, CALL)
TERMINATORS = (END, CALL, RETURN)
HEADER_ENDS = (START, END, MESSAGE, RETURN, CALL)  # the markers that end a header

_FUNCTIONS = "functions."

#: body kinds (:func:`classify`); a reasoning, content or dropped body is a region of that kind
CALL_KIND = "call"

#: Pseudo-marks (:func:`read_message`): the header after a terminator (text outside every message
#: until it turns out to be a header), the header after ``<|start|>`` (it has a role part), the
#: body regions, and the call body (followed by the function's name).
HEADER = "\x00header"
HEADER_STARTED = "\x00header+start"
BODIES = {REASONING: "\x00reasoning", CONTENT: "\x00content", DROP: "\x00drop"}
CALL_BODY = "\x00call "


_WORD = re.compile(r"(?:(?!<\|)\S)*")  # \S: not str.isspace (the regex engine's Unicode test)


def _word(text: str, pos: int) -> str:
    """The run of characters at ``pos`` up to whitespace, ``<|`` or the end (chars)."""
    return _WORD.match(text, pos).group()  # type: ignore[union-attr]


def classify(header: str, started: bool) -> tuple[str, str]:
    """``(kind, name)`` for a message header (the text before ``<|message|>``, markers included).

    ``started``: the header was opened by ``<|start|>`` (it has a role part). ``kind`` is one of
    ``"reasoning"``, ``"content"``, ``"drop"``, ``"call"``; ``name`` is the function name for a call,
    else ``""``. The rules are in the module docstring.
    """
    if started:
        role = _word(header, skip_ws(header, 0))
        if role and not role.startswith("to=") and role != "assistant":
            return DROP, ""
    recipient = ""
    t = header.rfind("to=")
    while t > 0 and not (header[t - 1].isspace() or header[t - 1] == ">"):
        t = header.rfind("to=", 0, t)
    if t >= 0:
        recipient = _word(header, t + 3)
    if recipient == "assistant":
        recipient = ""
    if recipient:
        if recipient.startswith(_FUNCTIONS) and len(recipient) > len(_FUNCTIONS):
            return CALL_KIND, recipient[len(_FUNCTIONS) :]
        return DROP, ""
    c = header.rfind(CHANNEL)
    channel = _word(header, skip_ws(header, c + len(CHANNEL))) if c >= 0 else ""
    return (REASONING if channel == "analysis" else CONTENT), ""


def call_args(body: str, terminator: str | None) -> str | None:
    """The arguments JSON text of a call body ended by ``terminator`` (a marker, None at the end
    of the text), or None when the body is no call (module rules)."""
    j = skip_ws(body, 0)
    if j == len(body):
        return "{}" if terminator == CALL else None
    try:
        obj, k = decode_at(body, j)
    except json.JSONDecodeError:
        return None
    if skip_ws(body, k) != len(body) or not isinstance(obj, dict):
        return None
    return dumps_arguments(obj)


def read_message(text: str, s: int, mark: str, final: bool = True) -> tuple[int, list[ToolCall] | None, str] | tuple[int, list[ToolCall] | None] | None:
    """The grammar (:data:`~replay.parsers._family.Grammar`) of the block at ``text[s]`` opened by
    ``mark``: a marker, or one of the pseudo-marks :data:`HEADER`, :data:`HEADER_STARTED`,
    ``CALL_BODY + name``. Returns ``(end, calls or None[, what follows])``; None on a stream's
    prefix that cannot decide it (a header or call body whose ending marker has not arrived).

    * a terminator / ``<|start|>``: framing (``[]``), followed by a header;
    * a header (pseudo-mark, or at ``<|channel|>``/``<|constrain|>``/``<|message|>``): up to and
      with ``<|message|>``, framing, followed by its body (:func:`classify`); ended at a
      ``<|start|>`` or terminator instead (not consumed): dropped, or content verbatim when it is
      text outside every message (no ``<|start|>`` opened it, no ``<|channel|>``/``<|constrain|>``
      in it); likewise at the end of the text;
    * a call body: up to the next marker (not consumed) or the end of the text: the call when
      :func:`call_args` accepts it, else the body is content verbatim.
    """
    if mark in TERMINATORS:
        return s + len(mark), [], HEADER
    if mark == START:
        return s + len(mark), [], HEADER_STARTED
    if mark.startswith(CALL_BODY):
        q, m = first_marker(text, MARKERS, s)
        if q < 0:
            if not final:
                return None
            q = len(text)
        args = call_args(text[s:q], m or None)
        return q, (None if args is None else [ToolCall(mark[len(CALL_BODY) :], args)])
    q, m = first_marker(text, HEADER_ENDS, s)  # <|channel|>/<|constrain|> before it are header
    if m == MESSAGE:
        kind, name = classify(text[s:q], mark == HEADER_STARTED)
        return q + len(m), [], (CALL_BODY + name if kind == CALL_KIND else BODIES[kind])
    if q < 0:
        if not final:
            return None
        q = len(text)
    outside = mark != HEADER_STARTED and text.find(CHANNEL, s, q) < 0 and text.find(CONSTRAIN, s, q) < 0
    return q, (None if outside else [])


class HarmonyParser(GrammarParser):
    """Tool parser for OpenAI gpt-oss (Harmony format, ``o200k_harmony`` special tokens as text).

    Mirrors, in syntax, ``openai_harmony``'s message grammar as used by vLLM (``OpenAIToolParser``
    and the Harmony path of ``serving_chat.py``) and SGLang ``GptOssDetector``/``HarmonyParser``;
    the rules for malformed output and the choice of content are this module's (module
    docstring). Works on text with the special tokens kept, not on token ids. ``tools`` is
    accepted and ignored (calls to undeclared tools are reported). ``reasoning_open``: the output
    starts inside an analysis message body.
    """

    name: ClassVar[str] = "harmony"
    covers: ClassVar[str] = "OpenAI gpt-oss-20b / gpt-oss-120b (Harmony: analysis/commentary/final channels, to=functions.NAME calls)"
    markers: ClassVar[tuple[str, ...]] = MARKERS
    call_starts: ClassVar[tuple[str, ...]] = ("to=" + _FUNCTIONS,)  # distinctive call openers (replay.family_fit)
    end_tokens: ClassVar[tuple[str, ...]] = ("<|endoftext|>",)
    STARTS = MARKERS
    WAKE = HEADER_ENDS  # a header is read again when a marker that can end it arrives
    REGIONS: ClassVar[dict[str, Region]] = {v: (k, MARKERS) for k, v in BODIES.items()}

    def first(self) -> str:
        """The completion starts in the first message's header, or (``reasoning_open``) in an
        analysis body."""
        return BODIES[REASONING] if self._reasoning_open else HEADER

    read = staticmethod(read_message)  # the grammar (:data:`~replay.parsers._family.Grammar`)

    def wake(self, mark: str) -> MarkerWake:
        """A call body is read again when any marker arrives (the first one ends it), a header
        when one that can end it arrives (``WAKE``)."""
        if mark.startswith(CALL_BODY):
            return MarkerWake(MARKERS, 0)
        return super().wake(mark)
