"""What the family parsers share: the whole-text block loop and the streaming base class.

* :func:`parse_blocks`: the whole-text parse of the families whose output is text with call
  blocks in it (each block found at a start marker and decided by the family);
* :class:`GrammarParser`: the streaming engine over a family's whole-text grammar (the block
  grammars of the families build on it: :mod:`replay.parsers._sections` for calls sections);
* :class:`StreamParser`: ``feed``/``finish`` around the family's ``_drain``. A family parser
  derives from it, calls its ``__init__`` with the request's tools and its reasoning splitter, and
  implements ``parse`` (whole text) and ``_drain(final)``: move on over ``self._buf`` (the body
  text received so far that is not yet decided) and return the
  :class:`~replay.parsers.base.StreamDelta` it completes. Calls are made into deltas only through
  :meth:`StreamParser._emit_call` (one place, which the tests override to plant bugs).

One concern at over 600 lines: the one grammar engine every family parser builds on (whole-text
block loop, streaming engine, feed/finish); split, a family's streaming and whole-text paths
could drift apart, which is what the family suite checks they never do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol

from replay.parsers._jsonscan import JsonPrefix, skip_ws
from replay.parsers._markers import TokenStripper, _firsts, find_marker, first_marker, longest, strip_tokens
from replay.parsers._reasoning import ReasoningSplitter, split_reasoning
from replay.parsers.base import CallDelta, ParseResult, StreamDelta, ToolCall

#: A family's block reader for :func:`parse_blocks`: ``(text, index of the marker, marker) ->
#: (end, calls)``, ``end`` the index just after the block; ``calls`` None when the block is no
#: call (its text is content), else its calls (an empty list: the marker is framing, dropped).
BlockReader = Callable[[str, int, str], tuple[int, "list[ToolCall] | None"]]

#: A family's block grammar, the one both paths use (:class:`GrammarParser`): a
#: :data:`BlockReader` with a last argument ``final``. With ``final`` True the text is whole;
#: with ``final`` False it is a stream's prefix, and the grammar returns None whenever more text
#: could change its answer (it never guesses), so that any answer it gives on a prefix is the one
#: it gives on every longer text. An answer may name, third, the pseudo-mark of the block that
#: must follow it (a block read at the same position, or a :data:`Region`); without one, a block
#: that gave calls is followed by a :data:`CHAIN` block in a family that chains them, else by
#: nothing. Its list of calls may hold strings: content, in order with the calls (a block whose
#: answer carries both, such as a calls section's head, :mod:`replay.parsers._sections`).
Grammar = Callable[[str, int, str, bool], "tuple[int, list[ToolCall] | None] | tuple[int, list[ToolCall] | None, str] | None"]


def _verbatim(text: str) -> str:
    return text


#: Pseudo-marks of the blocks that start at no marker (:func:`parse_blocks`, :class:`GrammarParser`):
#: ``HEAD`` at the first non-whitespace character of the body (a bare call list or object at the
#: start of the output); ``CHAIN`` right after a block that gave calls (the next item of a chain
#: such as Llama 3's ``{...}; {...}``). A grammar reads such a block from ``s`` (it consumes no
#: marker) and answers ``(s, None)`` when there is none there: nothing is content, and the text
#: from ``s`` is read on as text outside blocks.
HEAD = "\x00head"
CHAIN = "\x00chain"
_WS = " \t\n\r"

#: The kinds of a :data:`Region`'s text.
CONTENT = "content"
REASONING = "reasoning"
DROP = "drop"

#: A region: text streamed as it arrives, outside blocks: ``(kind, stops)``, ``kind`` one of
#: :data:`CONTENT`, :data:`REASONING`, :data:`DROP` (framing, never shown), ``stops`` the markers
#: that open the next block. The default region of a family is ``(CONTENT, STARTS)``; a grammar
#: enters another by naming, as the pseudo-mark that follows a block (:data:`Grammar`), a key of
#: the family's ``REGIONS`` (a Harmony message body, a Gemma 4 reasoning section). The region
#: lasts up to its first stop marker; the block there decides what follows it.
Region = tuple[str, tuple[str, ...]]


def parse_blocks(
    text: str,
    starts: tuple[str, ...],
    read: BlockReader | None = None,
    *,
    pos: int = 0,
    block_content: Callable[[str], str] = _verbatim,
    head: bool = False,
    chain: bool = False,
    grammar: Grammar | None = None,
    first: str = "",
    regions: dict[str, Region] | None = None,
    reasoning: list[str] | None = None,
) -> tuple[str, list[ToolCall]]:
    """Whole-text parse of ``text[pos:]`` into ``(content, calls)``: text outside blocks is
    content, verbatim; a block starts at the first of ``starts`` and ``read`` decides it. The text
    of a block that is no call is content, through ``block_content`` (e.g. dropping section
    markers). Parsing goes on after every block. ``head``: a :data:`HEAD` block is tried at the
    first non-whitespace character (the whitespace before it is content); ``chain``: a
    :data:`CHAIN` block is tried right after every block that gave calls; a reader's answer
    ``(end, calls, pseudo-mark)`` names the block that follows it (:data:`Grammar`). ``grammar``:
    a :data:`Grammar` to call with ``final=True`` instead of ``read``. ``first``: the pseudo-mark
    the text starts with (``head`` is ``first=HEAD``); ``regions``: the family's
    :data:`Region` pseudo-marks, whose reasoning text is appended to ``reasoning``."""
    content: list[str] = []
    calls: list[ToolCall] = []
    if grammar is None:
        assert read is not None
        grammar = lambda text, s, mark, final: read(text, s, mark)  # noqa: E731
    n = len(text)
    stops = starts
    out = content  # where the text outside blocks goes (a region's kind; None: dropped)
    virtual = HEAD if head else first
    if virtual == HEAD:
        j = skip_ws(text, pos)
        content.append(text[pos:j])
        pos = j
    while True:
        if virtual and regions and virtual in regions:
            kind, stops = regions[virtual]
            out = None if kind == DROP else reasoning if kind == REASONING and reasoning is not None else content
            virtual = ""
        if virtual:
            s, mark = pos, virtual
        else:
            s, mark = first_marker(text, stops, pos) if pos < n else (-1, "")
            if s < 0:
                if out is not None:
                    out.append(text[pos:])
                return "".join(content), calls
            if out is not None and s > pos:
                out.append(text[pos:s])
            stops, out = starts, content
        got = grammar(text, s, mark, True)
        pos, found = got[0], got[1]
        if found is None:
            if pos > s:
                content.append(block_content(text[s:pos]))
        else:
            for call in found:
                (content if type(call) is str else calls).append(call)  # type: ignore[arg-type]
        virtual = got[2] if len(got) > 2 else (CHAIN if chain and found is not None else "")


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
    ``think`` the family's :class:`Splitter`, or None: :meth:`splitter` makes it at the first
    ``feed``/``finish`` (a parser used only for the whole-text parse never builds its streaming
    state). The reasoning the splitter separates comes before any reasoning ``_drain`` reports
    itself (families that read their own reasoning syntax).
    """

    tools: list[dict[str, Any]] | None
    #: the family's end-of-turn / end-of-sequence tokens: servers never show them in content (a
    #: stop token ends the text, a skipped special token is not decoded), so both paths remove
    #: every occurrence from the raw text before anything else (:func:`strip_tokens`,
    #: :class:`TokenStripper`; prefix-free). ``replay formats`` lists them.
    end_tokens: ClassVar[tuple[str, ...]] = ()

    def __init__(self, tools: list[dict[str, Any]] | None, think: Splitter | None = None) -> None:
        self.tools = tools
        self._eot: TokenStripper | None = None  # built with the splitter, at the first feed/finish
        self._think = think
        self._split = False
        self._buf = ""  # body text received and not yet decided
        self._index = 0  # OpenAI tool_calls[].index of the next call
        self._finished = False

    def splitter(self) -> Splitter:
        """The streaming reasoning splitter when ``__init__`` was given none: no reasoning."""
        return NoReasoning()

    def _start(self) -> TokenStripper:
        """Build the streaming state (end-token stripper, splitter) at the first feed/finish."""
        self._eot = eot = TokenStripper(self.end_tokens)
        if self._think is None:
            self._think = self.splitter()
        self._split = not isinstance(self._think, NoReasoning)  # NoReasoning: every delta is body
        return eot

    def feed(self, delta: str) -> StreamDelta:
        """Streaming parse: take the next delta (text); return the content, tool-call and
        reasoning fragments it completes. Raises RuntimeError after :meth:`finish`."""
        if self._finished:
            raise RuntimeError("feed() after finish(): construct a new parser per stream")
        body = (self._eot or self._start()).feed(delta)
        reasoning = ""
        if self._split:
            reasoning, body = self._think.feed(body)  # type: ignore[union-attr]
        if body:
            self._append(body)
        out = self._drain(final=False)
        if reasoning:
            out.reasoning = reasoning + out.reasoning
        return out

    def feed_all(self, deltas: Sequence[str]) -> list[StreamDelta]:
        """Feed every delta of ``deltas`` (a sequence of texts) in order; return the events that
        carry anything: ``[e for e in map(self.feed, deltas) if e]`` (an event with no content,
        reasoning or call delta sends no chunk and changes nothing a client assembles,
        :mod:`replay.assemble`). The parser's state afterwards is the one those ``feed`` calls
        leave; :meth:`finish` is not called. Raises what ``feed`` raises (RuntimeError after
        :meth:`finish`). :class:`GrammarParser` runs its ``feed`` shortcut in one loop here."""
        feed = self.feed
        return [e for e in map(feed, deltas) if e.content or e.calls or e.reasoning]

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
        tail = (self._eot or self._start()).finish()
        think = self._think
        assert think is not None
        head_reasoning, head = think.feed(tail) if tail else ("", "")
        reasoning, body = think.finish()
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


class MarkerWake:
    """When an open block may have become decidable: the block's grammar is asked again only when
    a new occurrence of one of ``markers`` has arrived (or at the end of the stream, or the first
    time). ``seek``: where, in the parser's buffer, the search starts; each search starts at the
    last scanned position minus the longest marker's length plus one, so text is scanned once."""

    def __init__(self, markers: tuple[str, ...], seek: int) -> None:
        self.markers = markers
        self._longest = longest(markers)
        self._seek = seek
        self._first = True

    def wake(self, buf: str, final: bool) -> bool:
        """True when the grammar should read the block again (``buf``: the parser's buffer, the
        block starting at index 0; ``final``: the end of the stream)."""
        if self._first or final:
            self._first = False
            self._seek = max(self._seek, len(buf) - self._longest + 1)
            return True
        markers, seek = self.markers, self._seek
        if not markers:
            return False
        i = buf.find(markers[0], seek) if len(markers) == 1 else first_marker(buf, markers, seek)[0]
        nxt = len(buf) - self._longest + 1
        if nxt > seek:
            self._seek = nxt
        return i >= 0


class EveryDelta(MarkerWake):
    """The wake rule of a short block the grammar decides by its length or by any text (Gemma 4's
    ``<|channel>thought`` head, a calls section's items, :mod:`replay.parsers._sections`): read
    again at every delta that brought text (each read costs at most the block's bound)."""

    def __init__(self) -> None:
        super().__init__((), 0)

    def wake(self, buf: str, final: bool) -> bool:
        """True at the end of the stream or when there is undecided text."""
        return final or bool(buf)


class ValueScanner(Protocol):
    """An incremental extent scanner: :class:`~replay.parsers._jsonscan.JsonPrefix` (JSON) or
    :class:`~replay.parsers.pythonic.ListScan` (a Python list): ``feed(text) -> "more" | "done" |
    other`` (other: it can be no value), ``end`` the value's end once done (chars from the first
    fed character)."""

    end: int | None

    def feed(self, text: str) -> str: ...


class ValueEndWake(MarkerWake):
    """:class:`MarkerWake`, and once more when the value that opens the block's body is decided:
    the body is ``skip`` characters from ``seek`` then a value (its first character one of
    ``openers``) scanned incrementally by ``scanner()`` (each character once). With ``then_text``
    it wakes when the value is complete and a non-whitespace character follows it (Mistral's call
    list followed by prose ends there); without, as soon as the value is complete, can be none,
    or does not start with an opener (a Llama 3 JSON item, a bare Pythonic list: no end marker
    follows them)."""

    def __init__(
        self,
        markers: tuple[str, ...],
        seek: int,
        openers: str = "[",
        *,
        scanner: Callable[[], ValueScanner] = JsonPrefix,
        then_text: bool = True,
        skip: str = _WS,
    ) -> None:
        super().__init__(markers, seek)
        self._openers = openers
        self._scanner = scanner
        self._then_text = then_text
        self._skip = skip
        self._state = "pre"  # pre -> value -> post -> off
        self._pos = seek  # pre/post: skipped up to here; value: text fed up to here
        self._scan: ValueScanner | None = None
        self._value_at = 0

    def wake(self, buf: str, final: bool) -> bool:
        if self._first and not final:
            # the first look: read at once only when the text ends as a value would (a closing
            # bracket); else scan, so a value cut off by the delta is not decoded in vain
            self._first = False
            k = len(buf) - 1
            while k >= 0 and buf[k] in _WS:
                k -= 1
            if k >= 0 and buf[k] in "]}":
                self._seek = max(self._seek, len(buf) - self._longest + 1)
                return True
        if super().wake(buf, final):
            return True  # the grammar reads the block now; the value is scanned only while it waits
        hit = False
        n = len(buf)
        if self._state == "pre":
            j = self._pos
            while j < n and buf[j] in self._skip:
                j += 1
            self._pos = j
            if j < n:
                if buf[j] in self._openers:
                    self._state, self._value_at, self._scan = "value", j, self._scanner()
                else:
                    self._state = "off"
                    return hit or not self._then_text
        if self._state == "value":
            assert self._scan is not None
            status = self._scan.feed(buf[self._pos :])
            self._pos = n
            if status == "done":
                assert self._scan.end is not None
                self._state, self._pos = "post", self._value_at + self._scan.end
                if not self._then_text:
                    self._state = "off"
                    return True
            elif status != "more":
                self._state = "off"
                return hit or not self._then_text
        if self._state == "post":
            self._pos = skip_ws(buf, self._pos)
            if self._pos < n:
                self._state = "off"
                return True
        return hit


_SHORTCUT: dict[type, bool] = {}
_FEED_SET: set[type] = set()  # classes whose feed GrammarParser.__init_subclass__ chose


def _shortcut_class(cls: type) -> bool:
    """True when :meth:`GrammarParser.feed`'s shortcut can apply to parser class ``cls`` (once per
    class): the engine's own ``_drain`` and ``wake`` (its blocks wait on a plain
    :class:`MarkerWake`), one wake marker, no empty start marker. For any other class the checks
    would only cost, and its instances feed through :meth:`StreamParser.feed` directly."""
    got = _SHORTCUT.get(cls)
    if got is None:
        got = _SHORTCUT[cls] = bool(
            cls._drain is GrammarParser._drain and cls.wake is GrammarParser.wake and len(cls.WAKE) == 1 and all(cls.STARTS)
        )
    return got


class GrammarParser(StreamParser):
    """The streaming engine: a family's whole-text grammar, fed a stream.

    A family declares its markers and its grammar and little else:

    * ``STARTS``: the markers that open a block (outside a block every other text is content);
    * :meth:`read` (a :data:`Grammar`): decides the block at a start marker, on the whole text or
      on a stream's prefix;
    * ``WAKE``: the markers whose arrival inside an open block may let :meth:`read` decide it
      (its end markers, or the markers that end its header); :meth:`wake` may give another rule;
    * :meth:`block_content`: the content of a block that is no call (verbatim by default);
    * ``THINK`` / ``IMPLICIT_ENDS``: its reasoning tags (None: the family splits none off);
    * ``REGIONS``: the pseudo-marks of its :data:`Region` s (text streamed as content, reasoning or
      dropped up to a stop marker: Harmony's message bodies, Gemma 4's reasoning sections), and
      :meth:`first`, the pseudo-mark the body starts with.

    The whole-text parse is :func:`parse_blocks` with ``read(..., final=True)``. The stream keeps
    a settled position (the buffer holds only the undecided text): outside a block, content is
    emitted up to the next start marker, holding back only a suffix that may start one; at a start
    marker the block is buffered, and each time :meth:`wake` says so the grammar reads it; once it
    answers, the block's calls are sent (name and arguments, exactly the whole-text parse's, in
    one delta per call through :meth:`~StreamParser._emit_call`) or its text is content, and the
    buffer drops it. At ``finish()`` the grammar reads the rest as whole text. Because every
    answer on a prefix is the answer on the whole text, streamed and whole-text results agree
    under every chunking by construction.

    A call's name is sent with its arguments, when the grammar has decided the call: in every
    family a block whose name is known can still turn out to be no call (a malformed body, a call
    cut off by the end of the stream, which the content rules do not report), and a name once
    sent cannot be taken back (the client concatenates it).

    Cost: the outside scan and :class:`MarkerWake` look at each character a bounded number of
    times; the grammar reads an open block once when it opens and once per delta that brought a
    wake marker, so a block costs O(its length x deltas that brought one of its wake markers):
    linear for every grammar whose blocks carry a bounded number of wake markers, whatever the
    chunking.
    """

    STARTS: ClassVar[tuple[str, ...]] = ()
    WAKE: ClassVar[tuple[str, ...]] = ()
    THINK: ClassVar[tuple[str, str] | None] = None
    IMPLICIT_ENDS: ClassVar[tuple[str, ...]] = ()
    #: a :data:`HEAD` block is tried at the first non-whitespace character of the body
    HEAD_BLOCK: ClassVar[bool] = False
    #: a :data:`CHAIN` block is tried right after every block that gave calls
    CHAIN_BLOCKS: ClassVar[bool] = False
    #: the family's :data:`Region` pseudo-marks (none: all text outside blocks is content)
    REGIONS: ClassVar[dict[str, Region]] = {}

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        self._reasoning_open = reasoning_open
        super().__init__(tools)  # the splitter is made at the first feed (StreamParser._start)
        self._mark = ""  # the open block's start marker or pseudo-mark ("" outside a block)
        self._wake: MarkerWake | None = None
        self._virtual = self.first()  # the pseudo-block (or region) to try next
        self._default: Region = (CONTENT, self.STARTS)
        self._region = self._default  # the region read outside blocks
        self._fast = False  # feed's shortcut applies (set at the first feed/finish, _start)

    def _start(self) -> TokenStripper:
        """:meth:`StreamParser._start`, and whether :meth:`feed`'s shortcut applies to this parser:
        the engine's own ``_drain`` and a splitter that is none or a plain
        :class:`~replay.parsers._reasoning.ReasoningSplitter` (a family's own streaming rules go
        through the full path)."""
        eot = super()._start()
        think = self._think
        self._fast = _shortcut_class(type(self)) and (type(think) is NoReasoning or type(think) is ReasoningSplitter)
        self._stop_firsts = _firsts(self.STARTS)  # first chars of the default region's stop markers
        # feed_all's content shortcut: the first chars of the end tokens and of the stop markers, once
        self._plain_firsts = "".join(sorted(set(eot._firsts) | set(self._stop_firsts)))
        return eot

    def feed(self, delta: str) -> StreamDelta:
        """:meth:`StreamParser.feed`, with the same result and state, and a shortcut for the two
        deltas most of a stream is made of, each of which the full path would only pass through
        the end-token stripper, the reasoning splitter and ``_drain`` unchanged (for a family
        whose blocks wait on one wake marker, ``WAKE``, by the engine's own rule):

        * inside an open block whose wake rule is a plain :class:`MarkerWake` on one marker, a
          delta that brings no end-token character and after which that marker does not occur
          from the rule's search position: appended to the buffer, the rule's position moved on
          as its ``wake`` moves it, and an empty delta returned (the grammar is not asked);
        * outside blocks, in the default content region with nothing held back, a delta holding
          no first character of an end token or a start marker: it is all content.

        Anything else (and any parser whose family changes ``_drain`` or ``wake``, has other
        than one wake marker, or splits reasoning its own way) goes through
        :meth:`StreamParser.feed`."""
        if self._fast and not self._finished:
            eot = self._eot
            firsts = eot._firsts  # type: ignore[union-attr]
            if not eot._held and (not firsts or ((firsts not in delta) if len(firsts) == 1 else not any(c in delta for c in firsts))):  # type: ignore[union-attr]
                if not self._split or self._think.state == "body":  # type: ignore[union-attr]
                    if self._mark:
                        w = self._wake
                        if type(w) is MarkerWake and not w._first and len(w.markers) == 1:
                            buf = self._buf  # StreamParser._append: extended in place
                            self._buf = ""
                            buf += delta
                            self._buf = buf
                            seek = w._seek
                            if buf.find(w.markers[0], seek) >= 0:
                                return self._drain(final=False)  # the marker came: the full path from here
                            nxt = len(buf) - w._longest + 1
                            if nxt > seek:
                                w._seek = nxt
                            return StreamDelta()
                    elif not self._virtual and not self._buf and self._region is self._default:
                        stops = self._stop_firsts
                        if not any(c in delta for c in stops):
                            return StreamDelta(content=delta)
        return StreamParser.feed(self, delta)

    def feed_all(self, deltas: Sequence[str]) -> list[StreamDelta]:
        """:meth:`StreamParser.feed_all` (the events of ``[self.feed(d) for d in deltas]`` that
        carry anything, the same state after), with :meth:`feed`'s two shortcuts run as loops
        over consecutive deltas: the checks that do not change while a shortcut applies (the
        parser's mode, its open block's wake rule, the end-token and start-marker first
        characters) are made once per run of such deltas instead of once per delta, and the empty
        events of in-block deltas are never made. A delta a shortcut does not take goes through
        :meth:`StreamParser.feed`, as in :meth:`feed`. A class whose ``feed`` is not
        :meth:`GrammarParser.feed` (:meth:`__init_subclass__`) gets the plain loop."""
        if type(self).feed is not GrammarParser.feed:
            return StreamParser.feed_all(self, deltas)
        events: list[StreamDelta] = []
        keep = events.append
        slow = StreamParser.feed
        i, n = 0, len(deltas)
        while i < n:
            eot = self._eot
            if eot is None or not self._fast or self._finished or eot._held or (self._split and self._think.state != "body"):  # type: ignore[union-attr]
                e = slow(self, deltas[i])  # the first delta (it builds the streaming state), or a mode no shortcut takes
                i += 1
                if e.content or e.calls or e.reasoning:
                    keep(e)
                continue
            firsts = eot._firsts
            one = len(firsts) == 1
            if self._mark:
                w = self._wake
                if type(w) is MarkerWake and not w._first and len(w.markers) == 1:
                    marker, longest, seek = w.markers[0], w._longest, w._seek
                    buf = self._buf  # StreamParser._append: extended in place (the attribute's reference dropped)
                    self._buf = ""
                    woke = False
                    while i < n:
                        d = deltas[i]
                        if firsts and ((firsts in d) if one else any(c in d for c in firsts)):
                            break  # an end token may start in it: the full path
                        buf += d
                        i += 1
                        if buf.find(marker, seek) >= 0:
                            woke = True  # the marker came: the full path from here
                            break
                        nxt = len(buf) - longest + 1
                        if nxt > seek:
                            seek = nxt
                    self._buf = buf
                    w._seek = seek
                    if woke:
                        e = self._drain(final=False)
                        if e.content or e.calls or e.reasoning:
                            keep(e)
                        continue
            elif not self._virtual and not self._buf and self._region is self._default:
                bad = self._plain_firsts  # a delta holding none of these is all content
                if len(bad) == 1:
                    while i < n and bad not in (d := deltas[i]):
                        if d:
                            keep(StreamDelta(content=d))
                        i += 1
                else:
                    while i < n and not any(c in (d := deltas[i]) for c in bad):
                        if d:
                            keep(StreamDelta(content=d))
                        i += 1
            if i < n:
                e = slow(self, deltas[i])  # a delta no shortcut takes (as feed() would send it)
                i += 1
                if e.content or e.calls or e.reasoning:
                    keep(e)
        return events

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A family class to which :meth:`feed`'s shortcut can never apply (:func:`_shortcut_class`)
        and that defines no ``feed`` of its own feeds through :meth:`StreamParser.feed` directly:
        the shortcut's checks would only cost it a call per delta."""
        super().__init_subclass__(**kwargs)
        if "feed" in cls.__dict__:
            return  # the family's own
        definer = next(k for k in cls.__mro__ if "feed" in k.__dict__)
        if definer is not GrammarParser and definer not in _FEED_SET:
            return  # an ancestor's own feed
        want = GrammarParser.feed if _shortcut_class(cls) else StreamParser.feed
        if cls.feed is not want:
            cls.feed = want  # type: ignore[method-assign]
            _FEED_SET.add(cls)

    def first(self) -> str:
        """The pseudo-mark the body starts with: :data:`HEAD` with ``HEAD_BLOCK``, else none
        (``""``); a family whose output starts inside a block or a region names it."""
        return HEAD if self.HEAD_BLOCK else ""

    def read(self, text: str, s: int, mark: str, final: bool) -> tuple[int, list[ToolCall] | None] | None:  # pragma: no cover
        """The family's :data:`Grammar`: the block at ``text[s]`` (its start marker ``mark``)."""
        raise NotImplementedError

    def block_content(self, text: str) -> str:
        """The content of a block that is no call: its text, verbatim (markers included)."""
        return text

    def wake(self, mark: str) -> MarkerWake:
        """The rule for when an open block opened by ``mark`` (a start marker, or :data:`HEAD` /
        :data:`CHAIN`, any pseudo-mark) is read again (:class:`MarkerWake` on ``WAKE``, searched
        from just after the start marker)."""
        return MarkerWake(self.WAKE, 0 if mark[:1] == "\x00" else len(mark))

    def splitter(self) -> Splitter:
        """The streaming reasoning splitter (``THINK``, ``IMPLICIT_ENDS``, ``reasoning_open``);
        a family with another reasoning syntax overrides it with :meth:`split_whole`."""
        if self.THINK is None:
            return NoReasoning()
        return ReasoningSplitter(self.THINK, open=self._reasoning_open, implicit_ends=self.IMPLICIT_ENDS)

    def split_whole(self, text: str) -> tuple[str, str]:
        """``(reasoning, body)`` of a whole text (end tokens already removed)."""
        if self.THINK is None:
            return "", text
        return split_reasoning(text, self.THINK, open=self._reasoning_open, implicit_ends=self.IMPLICIT_ENDS)

    def parse(self, text: str) -> ParseResult:
        """Whole-text parse: ``text`` (raw completion) -> reasoning, content and calls: end tokens
        removed, reasoning split off, then the family's grammar over the body."""
        reasoning, body = self.split_whole(self.strip_end_tokens(text))
        more: list[str] | None = [reasoning] if self.REGIONS else None
        content, calls = parse_blocks(
            body,
            self.STARTS,
            grammar=self.read,
            block_content=self.block_content,
            chain=self.CHAIN_BLOCKS,
            first=self.first(),
            regions=self.REGIONS,
            reasoning=more,
        )
        return ParseResult(content=content, calls=tuple(calls), reasoning=reasoning if more is None else "".join(more))

    def _drain(self, final: bool) -> StreamDelta:
        out = StreamDelta()
        parts: list[str] = []  # content
        thoughts: list[str] = []  # reasoning (regions of kind REASONING)
        buf = self._buf
        mark = self._mark
        while True:
            if not mark:
                v = self._virtual
                if v:
                    if v in self.REGIONS:
                        self._region, self._virtual = self.REGIONS[v], ""
                    elif not buf and not final:
                        break  # a pseudo-block opens when its first text arrives
                    elif v == HEAD:
                        j = skip_ws(buf, 0)
                        if j:
                            parts.append(buf[:j])
                            buf = buf[j:]
                            if not buf and not final:
                                break
                        mark, self._virtual = HEAD, ""
                        self._wake = None if final else self.wake(HEAD)
                    else:
                        mark, self._virtual = v, ""
                        self._wake = None if final else self.wake(v)
                if not mark:
                    if not buf:
                        break
                    kind, stops = self._region
                    i, mark = find_marker(buf, stops, final)
                    if i:
                        if kind == CONTENT:
                            parts.append(buf[:i])
                        elif kind == REASONING:
                            thoughts.append(buf[:i])
                        buf = buf[i:]
                    if not mark:
                        break
                    self._wake = None if final else self.wake(mark)
                    self._region = self._default
            # at the end of the stream every open block is read (no wake rule is asked)
            if not final and not self._wake.wake(buf, False):  # type: ignore[union-attr]
                break
            got = self.read(buf, 0, mark, final)
            if got is None:
                if final:  # pragma: no cover - a grammar answers on the whole text
                    raise RuntimeError(f"{type(self).__name__}.read gave no answer on the whole text")
                break
            end, calls = got[0], got[1]
            if calls is None:
                if end:
                    parts.append(self.block_content(buf[:end]))
            elif calls:
                raw = buf[:end]
                for call in calls:
                    if type(call) is str:
                        parts.append(call)
                    else:
                        self._send(out, call.name, call.arguments, raw)
            if len(got) > 2:
                self._virtual = got[2]
            elif self.CHAIN_BLOCKS and calls is not None:
                self._virtual = CHAIN
            if end:
                buf = buf[end:]
            mark, self._wake = "", None
        self._mark = mark
        self._buf = buf
        if parts:
            out.content = "".join(parts)
        if thoughts:
            out.reasoning = "".join(thoughts)
        return out
