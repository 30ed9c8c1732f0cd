"""What the family parsers share: the whole-text block loop and the streaming base class.

* :func:`parse_blocks`: the whole-text parse of the families whose output is text with call
  blocks in it (each block found at a start marker and decided by the family);
* :func:`parse_sectioned` and :class:`SectionedParser`: the whole-text parse and the ``_drain``
  of the families whose calls are token blocks inside sections (DeepSeek V3 and V3.1, Kimi K2);
* :class:`StreamParser`: ``feed``/``finish`` around the family's ``_drain``. A family parser
  derives from it, calls its ``__init__`` with the request's tools and its reasoning splitter, and
  implements ``parse`` (whole text) and ``_drain(final)``: move on over ``self._buf`` (the body
  text received so far that is not yet decided) and return the
  :class:`~replay.parsers.base.StreamDelta` it completes. Calls are made into deltas only through
  :meth:`StreamParser._emit_call` (one place, which the tests override to plant bugs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from replay.parsers._block import Decided, object_arguments
from replay.parsers._markers import TokenStripper, find_marker, first_marker, strip_tokens
from replay.parsers.base import CallDelta, StreamDelta, ToolCall

#: A family's block reader for :func:`parse_blocks`: ``(text, index of the marker, marker) ->
#: (end, calls)``, ``end`` the index just after the block; ``calls`` None when the block is no
#: call (its text is content), else its calls (an empty list: the marker is framing, dropped).
BlockReader = Callable[[str, int, str], tuple[int, "list[ToolCall] | None"]]


def _verbatim(text: str) -> str:
    return text


def parse_blocks(
    text: str,
    starts: tuple[str, ...],
    read: BlockReader,
    *,
    pos: int = 0,
    block_content: Callable[[str], str] = _verbatim,
) -> tuple[str, list[ToolCall]]:
    """Whole-text parse of ``text[pos:]`` into ``(content, calls)``: text outside blocks is
    content, verbatim; a block starts at the first of ``starts`` and ``read`` decides it. The text
    of a block that is no call is content, through ``block_content`` (e.g. dropping section
    markers). Parsing goes on after every block."""
    content: list[str] = []
    calls: list[ToolCall] = []
    while True:
        s, mark = first_marker(text, starts, pos)
        if s < 0:
            content.append(text[pos:])
            return "".join(content), calls
        content.append(text[pos:s])
        pos, found = read(text, s, mark)
        if found is None:
            content.append(block_content(text[s:pos]))
        else:
            calls.extend(found)


class Splitter(Protocol):
    """A streaming reasoning splitter (:class:`~replay.parsers._reasoning.ReasoningSplitter` and
    relatives): ``feed(delta)`` and ``finish()`` return ``(reasoning fragment, body fragment)``."""

    def feed(self, delta: str) -> tuple[str, str]: ...

    def finish(self) -> tuple[str, str]: ...


class NoReasoning:
    """The splitter of a family that splits no reasoning off before its ``_drain`` (none, or its
    own channel syntax read by ``_drain``): all text is body."""

    def feed(self, delta: str) -> tuple[str, str]:
        return "", delta

    def finish(self) -> tuple[str, str]:
        return "", ""


class StreamParser:
    """Base of the family parsers: the streaming protocol (``feed``, ``finish``) over a reasoning
    splitter and the family's ``_drain``.

    ``__init__(tools, think)``: ``tools`` the request's tool declarations (kept as ``self.tools``),
    ``think`` the family's :class:`Splitter`. The reasoning the splitter separates comes before
    any reasoning ``_drain`` reports itself (families that read their own reasoning syntax).
    """

    tools: list[dict[str, Any]] | None
    #: the family's end-of-turn / end-of-sequence tokens: servers never show them in content (a
    #: stop token ends the text, a skipped special token is not decoded), so both paths remove
    #: every occurrence from the raw text before anything else (:func:`strip_tokens`,
    #: :class:`TokenStripper`; prefix-free). ``replay formats`` lists them.
    end_tokens: ClassVar[tuple[str, ...]] = ()

    def __init__(self, tools: list[dict[str, Any]] | None, think: Splitter) -> None:
        self.tools = tools
        self._eot = TokenStripper(self.end_tokens)
        self._think = think
        self._buf = ""  # body text received and not yet decided
        self._index = 0  # OpenAI tool_calls[].index of the next call
        self._finished = False

    def feed(self, delta: str) -> StreamDelta:
        """Streaming parse: take the next delta (text); return the content, tool-call and
        reasoning fragments it completes. Raises RuntimeError after :meth:`finish`."""
        if self._finished:
            raise RuntimeError("feed() after finish(): construct a new parser per stream")
        reasoning, body = self._think.feed(self._eot.feed(delta))
        self._append(body)
        out = self._drain(final=False)
        out.reasoning = reasoning + out.reasoning
        return out

    def _append(self, body: str) -> None:
        """Add ``body`` to the undecided buffer in amortised O(len(body)).

        ``self._buf += body`` copies the whole buffer on every delta (CPython resizes a string in
        place only when a local variable holds its one reference), which made a multi-MB call
        quadratic under fine chunkings. Dropping the attribute's reference first lets the
        concatenation extend the string in place.
        """
        if not body:
            return
        buf = self._buf
        self._buf = ""
        buf += body
        self._buf = buf

    def finish(self) -> StreamDelta:
        """End of stream: decide the open block by the family's rules (a call complete at the end
        of the text is reported here), release held-back text. A second call returns an empty
        delta."""
        if self._finished:
            return StreamDelta()
        tail = self._eot.finish()
        head_reasoning, head = self._think.feed(tail) if tail else ("", "")
        reasoning, body = self._think.finish()
        reasoning = head_reasoning + reasoning
        self._append(head + body)
        out = self._drain(final=True)
        out.reasoning = reasoning + out.reasoning
        self._finished = True
        return out

    def strip_end_tokens(self, text: str) -> str:
        """Whole-text side of :attr:`end_tokens`: ``text`` without them (every family's ``parse``
        calls it first, as ``feed`` filters each delta)."""
        return strip_tokens(text, self.end_tokens)

    def _emit_call(self, index: int, name: str, arguments: str, raw: str) -> list[CallDelta]:
        """The tool-call deltas sent for one decided call: the name once and the arguments, exactly
        the whole-text parse's string, in one delta. ``raw``: the model's text of the call (what
        the family reads the arguments from)."""
        return [CallDelta(index=index, name=name, arguments=arguments)]

    def _send(self, out: StreamDelta, name: str, arguments: str, raw: str) -> None:
        """Add one decided call's deltas to ``out`` with the next index."""
        out.calls.extend(self._emit_call(self._index, name, arguments, raw))
        self._index += 1

    def _drain(self, final: bool) -> StreamDelta:  # pragma: no cover - every family defines it
        """Move on over ``self._buf``; ``final``: the end of the stream."""
        raise NotImplementedError


def parse_sectioned(
    text: str,
    call_begin: str,
    begins: tuple[str, ...],
    ends: tuple[str, ...],
    read: BlockReader,
) -> tuple[str, list[ToolCall]]:
    """Whole-text parse of a family whose call blocks (opened by ``call_begin``) sit in sections
    opened by one of ``begins`` and closed by one of ``ends`` (DeepSeek V3 / V3.1, Kimi K2):
    ``(content, calls)``. ``read`` decides a block as for :func:`parse_blocks` (only ever called
    at ``call_begin``).

    The rules (the README's content-rules table): outside a section, text is content verbatim
    (a stray section-end marker too) and a call block is decided where it stands (bare calls are
    calls). A section runs from its begin marker to the first end marker after it, or to the end
    of the text; a block decided inside it may run past an end marker (its extent is the block's).
    A section holding at least one call is framing: its begin/end markers (and a repeated begin
    marker inside it) are dropped and the rest of its text is content verbatim. A section holding
    no call is content verbatim, markers included. A block that is no call is content verbatim,
    markers included, wherever it is (the Hermes rule).
    """
    content: list[str] = []
    calls: list[ToolCall] = []
    outside = (call_begin, *begins)
    inside = (call_begin, *ends, *begins)
    pos = 0
    while True:
        s, mark = first_marker(text, outside, pos)
        if s < 0:
            content.append(text[pos:])
            return "".join(content), calls
        content.append(text[pos:s])
        if mark == call_begin:
            pos, found = read(text, s, mark)
            if found is None:
                content.append(text[s:pos])
            else:
                calls.extend(found)
            continue
        sec_content: list[str] = []
        sec_calls: list[ToolCall] = []
        p = s + len(mark)
        while True:
            q, m2 = first_marker(text, inside, p)
            if q < 0:
                sec_content.append(text[p:])
                p = len(text)
                break
            sec_content.append(text[p:q])
            if m2 != call_begin:
                p = q + len(m2)
                if m2 in ends:
                    break
                continue  # a begin marker repeated inside the section
            p, found = read(text, q, m2)
            if found is None:
                sec_content.append(text[q:p])
            else:
                sec_calls.extend(found)
        if sec_calls:
            content.extend(sec_content)
            calls.extend(sec_calls)
        else:
            content.append(text[s:p])
        pos = p


class SectionedParser(StreamParser):
    """Streaming side of the families whose calls are blocks opened by ``CALL_BEGIN`` inside
    sections opened by one of ``SECTION_BEGINS`` and closed by one of ``SECTION_ENDS`` (DeepSeek
    V3 and V3.1, Kimi K2); the rules are :func:`parse_sectioned`'s, which the whole-text parse uses.

    Outside a section, text is emitted as soon as it cannot start ``CALL_BEGIN`` or a section
    begin marker. Inside a section, text is held until the section is decided: at its first call
    the held text (minus the markers) is emitted and the section's markers are dropped from then
    on; at its end marker (or the end of the stream) with no call, the held text is emitted
    verbatim, markers included. At ``CALL_BEGIN`` a block opens (:meth:`_open_block`, the buffer
    then starts at the marker) and the family's :meth:`_advance` reads its header and JSON body up
    to a :class:`~replay.parsers._block.Decided`. The block is a call when its JSON value is an
    object and the header gave ``self._name``; otherwise its text, verbatim, is content.
    """

    CALL_BEGIN: ClassVar[str] = ""
    SECTION_BEGINS: ClassVar[tuple[str, ...]] = ()
    SECTION_ENDS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, tools: list[dict[str, Any]] | None, think: Splitter) -> None:
        super().__init__(tools, think)
        self._in_block = False
        self._name: str | None = None  # the open block's function name, once its header is read
        self._section = ""  # "" outside a section, "held" before its first call, "calls" after
        self._held_content: list[str] = []  # a held section's text minus its markers
        self._held_verbatim: list[str] = []  # a held section's text, markers included
        self._outside = (self.CALL_BEGIN, *self.SECTION_BEGINS)
        self._inside = (self.CALL_BEGIN, *self.SECTION_ENDS, *self.SECTION_BEGINS)

    def _open_block(self) -> None:
        """Reset the header state for a block starting at ``self._buf[0]``."""

    def _advance(self, final: bool) -> Decided | None:  # pragma: no cover - every family defines it
        """Move the open block on; None while undecided."""
        raise NotImplementedError

    def _text(self, parts: list[str], content: str, verbatim: str) -> None:
        """Route text read at the current position: ``content`` is what it gives once its section
        holds a call (or outside a section), ``verbatim`` what it gives in a section with none."""
        if self._section == "held":
            self._held_content.append(content)
            self._held_verbatim.append(verbatim)
        else:
            parts.append(content)

    def _drain(self, final: bool) -> StreamDelta:
        out = StreamDelta()
        parts: list[str] = []
        while True:
            if not self._in_block:
                markers = self._inside if self._section else self._outside
                i, mark = find_marker(self._buf, markers, final)
                text = self._buf[:i]
                self._text(parts, text, text)
                if mark and mark != self.CALL_BEGIN:
                    self._buf = self._buf[i + len(mark) :]
                    if not self._section:
                        self._section = "held"
                        self._held_content, self._held_verbatim = [], [mark]
                    elif mark in self.SECTION_ENDS:
                        if self._section == "held":
                            parts.append("".join(self._held_verbatim) + mark)
                        self._section = ""
                    else:
                        self._text(parts, "", mark)  # a begin marker repeated inside the section
                    continue
                if not mark:
                    self._buf = self._buf[i:]
                    break
                self._buf = self._buf[i:]
                self._in_block = True
                self._name = None
                self._open_block()
            decided = self._advance(final)
            if decided is None:
                break
            raw, obj = decided.value(self._buf)
            args = None if self._name is None else object_arguments(obj)
            if self._name is None or args is None:
                block = self._buf[: decided.end]
                self._text(parts, block, block)
            else:
                if self._section == "held":
                    parts.append("".join(self._held_content))
                    self._section = "calls"
                self._send(out, self._name, args, raw)
            self._buf = self._buf[decided.end :]
            self._in_block = False
        if final and self._section == "held":
            parts.append("".join(self._held_verbatim))
            self._section = ""
        out.content = "".join(parts)
        return out
