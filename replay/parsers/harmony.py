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

Streaming: a state machine over the same tokens. Text that may be the start of a marker (a
suffix of the buffer that is a proper prefix of one) is held back; reasoning and content bodies
are streamed as they arrive; headers and call bodies are buffered (a call body is also scanned
incrementally with :class:`~replay.parsers._jsonscan.JsonPrefix`) and a call is sent in one
tool-call delta when its message ends: the name once, the arguments exactly the whole-text string.

End token ``<|endoftext|>`` (``end_tokens``) is removed from the raw text in both paths; ``<|return|>``
and ``<|call|>`` (gpt-oss's stop tokens) are read by the message grammar above and never reach content.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from replay.parsers._family import NoReasoning, StreamParser
from replay.parsers._jsonscan import DONE, MORE, JsonPrefix, decode_at, loads_or_too_deep, skip_ws
from replay.parsers.base import ParseResult, StreamDelta, ToolCall

START = "<|start|>"
END = "<|end|>"
MESSAGE = "<|message|>"
CHANNEL = "<|channel|>"
CONSTRAIN = "<|constrain|>"
RETURN = "<|return|>"
CALL = "<|call|>"

MARKERS = (START, END, MESSAGE, CHANNEL, CONSTRAIN, RETURN, CALL)
TERMINATORS = (END, CALL, RETURN)
_MAXLEN = max(len(m) for m in MARKERS)

_FUNCTIONS = "functions."

# body kinds
REASONING = "reasoning"
CONTENT = "content"
DROP = "drop"
CALL_KIND = "call"


def _word(text: str, pos: int) -> str:
    """The run of characters at ``pos`` up to whitespace, ``<|`` or the end (chars)."""
    end = pos
    n = len(text)
    while end < n and not text[end].isspace() and not text.startswith("<|", end):
        end += 1
    return text[pos:end]


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


def _marker_at(text: str, i: int) -> str | None:
    """The marker starting at index ``i`` of ``text``, or None."""
    for m in MARKERS:
        if text.startswith(m, i):
            return m
    return None


class HarmonyParser(StreamParser):
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

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        super().__init__(tools, NoReasoning())  # the channels are read by _drain
        self._reasoning_open = reasoning_open
        self._in_body = reasoning_open
        self._kind = REASONING if reasoning_open else ""
        self._name = ""
        self._header: list[str] = []
        self._started = False
        self._framed = False  # the open header holds <|channel|> or <|constrain|>
        self._body: list[str] = []  # a call body's text
        self._scan: JsonPrefix | None = None
        self._out = StreamDelta()  # what the current feed/finish yields, filled as text is read

    # ---------------------------------------------------------------- whole-text parse
    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion, special tokens as text) -> reasoning,
        content and calls, per the module rules. Never raises on model output."""
        text = self.strip_end_tokens(text)
        content: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCall] = []
        in_body = self._reasoning_open
        kind = REASONING if in_body else ""
        name = ""
        header = ""
        started = False
        framed = False  # the open header holds <|channel|> or <|constrain|>
        body_start = 0

        def close(end: int, terminator: str | None) -> None:
            body = text[body_start:end]
            if kind == REASONING:
                reasoning.append(body)
            elif kind == CONTENT:
                content.append(body)
            elif kind == CALL_KIND:
                args = _whole_call_args(body, terminator)
                if args is None:
                    content.append(body)
                else:
                    calls.append(ToolCall(name, args))

        pos = 0
        n = len(text)
        while True:
            # next complete marker at or after pos
            i = text.find("<|", pos)
            m = None
            while i >= 0:
                m = _marker_at(text, i)
                if m is not None:
                    break
                i = text.find("<|", i + 1)
            if i < 0:
                if in_body:
                    close(n, None)
                elif not started and not framed:
                    content.append(header + text[pos:])  # text outside every message
                break
            if in_body:
                close(i, m)
                in_body = False
                header, started, framed = "", False, False
                if m in TERMINATORS or m == START:
                    started = m == START
                    pos = i + len(m)
                    continue
                # <|channel|>, <|constrain|>, <|message|>: processed as header tokens below
            else:
                header += text[pos:i]
            if m == MESSAGE:
                kind, name = classify(header, started)
                in_body = True
                body_start = i + len(m)
            elif m in (CHANNEL, CONSTRAIN):
                header += m
                framed = True
            else:  # START or a terminator: a new header
                if not started and not framed:
                    content.append(header)  # text outside every message
                header, started, framed = "", m == START, False
            pos = i + len(m)
        return ParseResult(content="".join(content), calls=tuple(calls), reasoning="".join(reasoning))

    # ---------------------------------------------------------------- streaming
    def _drain(self, final: bool) -> StreamDelta:
        """Read ``_buf``; at the end of the stream (``final``) also decide the open message (a
        call body whose JSON is complete is sent here). Returns what was read and decided."""
        buf = self._buf
        pos = 0
        while True:
            i = buf.find("<|", pos)
            m = None
            partial = False
            while i >= 0:
                m = _marker_at(buf, i)
                if m is not None:
                    break
                if len(buf) - i < _MAXLEN and any(mk.startswith(buf[i:]) for mk in MARKERS):
                    partial = True
                    break
                i = buf.find("<|", i + 1)
            if m is None:
                if not partial and buf.endswith("<") and len(buf) - 1 >= pos:
                    i, partial = len(buf) - 1, True  # every marker starts with "<|"
                cut = i if (partial and not final) else len(buf)
                self._text(buf[pos:cut])
                pos = cut
                break
            self._text(buf[pos:i])
            pos = i + len(m)
            self._marker(m)
        self._buf = buf[pos:]
        if final:
            if self._in_body:
                self._close_body(None)
            else:
                self._flush_header()
        out, self._out = self._out, StreamDelta()
        return out

    def _text(self, t: str) -> None:
        if not t:
            return
        if not self._in_body:
            self._header.append(t)
        elif self._kind == REASONING:
            self._out.reasoning += t
        elif self._kind == CONTENT:
            self._out.content += t
        elif self._kind == CALL_KIND:
            self._body.append(t)
            assert self._scan is not None
            self._scan.feed(t)

    def _flush_header(self) -> None:
        """The open header ends without ``<|message|>``: its text is content when it is text
        outside every message (not opened by ``<|start|>``, no ``<|channel|>``/``<|constrain|>``),
        else framing (dropped)."""
        if not self._started and not self._framed:
            self._out.content += "".join(self._header)
        self._header, self._framed = [], False

    def _marker(self, m: str) -> None:
        if self._in_body:
            self._close_body(m)
            self._in_body = False
            self._header, self._started, self._framed = [], False, False
            if m in TERMINATORS or m == START:
                self._started = m == START
                return
        if m == MESSAGE:
            self._kind, self._name = classify("".join(self._header), self._started)
            self._in_body = True
            if self._kind == CALL_KIND:
                self._body = []
                self._scan = JsonPrefix()
        elif m in (CHANNEL, CONSTRAIN):
            self._header.append(m)
            self._framed = True
        else:
            self._flush_header()
            self._started = m == START

    def _close_body(self, terminator: str | None) -> None:
        if self._kind != CALL_KIND:
            return
        body = "".join(self._body)
        scan = self._scan
        assert scan is not None
        status = scan.status
        if status == MORE:
            status = scan.close()
        args = None
        if status == DONE and scan.end is not None:
            k = scan.end
            if skip_ws(body, k) == len(body):
                value = loads_or_too_deep(body[:k])
                if isinstance(value, dict):
                    args = json.dumps(value, ensure_ascii=False)
        elif body.strip(" \t\n\r") == "" and terminator == CALL:
            args = "{}"
        if args is None:
            self._out.content += body
        else:
            self._send(self._out, self._name, args, body)  # raw: the message body
        self._body = []
        self._scan = None


def _whole_call_args(body: str, terminator: str | None) -> str | None:
    """Arguments JSON text of a call body (whole-text path), or None when the body is not a call."""
    j = skip_ws(body, 0)
    if j == len(body):
        return "{}" if terminator == CALL else None
    try:
        obj, k = decode_at(body, j)
    except json.JSONDecodeError:
        return None
    if skip_ws(body, k) != len(body) or not isinstance(obj, dict):
        return None
    return json.dumps(obj, ensure_ascii=False)
