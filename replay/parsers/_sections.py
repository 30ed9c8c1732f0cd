"""The section grammar: call blocks inside a calls section, on the streaming engine.

DeepSeek V3 and V3.1 (``<｜tool▁calls▁begin｜>`` ... ``<｜tool▁calls▁end｜>``) and Kimi K2
(``<|tool_calls_section_begin|>`` ... ``<|tool_calls_section_end|>``) write their calls as token
blocks, each opened by a call-begin token and read by a per-call grammar (its header and JSON
body), inside a section. A family module derives from :class:`SectionParser`, declares the
tokens (``CALL_BEGIN``, ``SECTION_BEGINS``, ``SECTION_ENDS``, ``CALL_END``, ``WAKE``) and its call
grammar (:meth:`SectionParser.read_call`), and nothing else: the rules of sections and the
streaming are the engine's (:class:`~replay.parsers._family.GrammarParser`), the same code for the
whole-text parse and the stream.

The rules (the README's content-rules table; tests/test_content_rules.py):

* Outside a section, text is content verbatim (a stray section-end token too), and a call block
  is decided where it stands (a bare call, no section, is a call: SGLang looks for call blocks
  once the section start is present, llama.cpp's tests feed bare calls).
* A section runs from a begin token to the first end token after it, or to the end of the text;
  a block decided inside it may run past an end token (its extent is the block's).
* A section holding at least one call is framing: its begin/end tokens (and a begin token
  repeated inside it) are dropped and the rest of its text is content verbatim. A section
  holding no call is content verbatim, tokens included (SGLang's ``DeepSeekV31Detector`` returns
  the whole output on a bad block; no engine half-strips it).
* A block that is no call (the family's grammar says so: a malformed header or body, a call cut
  off by the end of the output) is content verbatim, markers included, wherever it is (the
  Hermes rule).

The grammar, as the engine reads it (:data:`~replay.parsers._family.Grammar`; every answer on a
stream's prefix is final; an answer's list holds content strings and calls in order):

* at ``CALL_BEGIN`` outside a section: the call block (:meth:`SectionParser.read_call`);
* at a section begin token: the section's head. It is answered once its first call is decided,
  with the section text before that call (tokens dropped), the call, and whatever of the section
  the text decides after it; a section that ends (its end token, or the end of the text) with no
  call is the section, verbatim;
* :data:`ITEMS` / :data:`CALL_IN`, the rest of a section that holds a call, read as far as the
  text decides it: text (emitted as it streams: only a suffix that may start a token is held), a
  repeated begin token (dropped), call blocks, up to the end token (dropped; outside again). It
  stops at an open call block (:data:`CALL_IN` follows: read again when one of ``WAKE`` arrives)
  or at a suffix that may start a token (:data:`ITEMS` follows: read again at the next delta).

Cost: each read of a section resumes where the last one stopped (a head that cannot be answered
yet keeps its progress, :meth:`SectionParser._section`), and a call block is read when it opens
and when one of ``WAKE`` arrives (or the family's :meth:`SectionParser.call_wake` says so); tokens
are found by :class:`Tokens`, in time linear in the distance to them: a section costs O(its
length) for blocks with a bounded number of tokens, whatever the chunking.
"""

from __future__ import annotations

from os.path import commonprefix
from typing import ClassVar

from replay.parsers._family import EveryDelta, GrammarParser, MarkerWake
from replay.parsers._markers import partial_marker_suffix
from replay.parsers.base import ToolCall

#: pseudo-mark of the next item of a section that holds a call (:class:`SectionParser`)
ITEMS = "\x00section-items"
#: pseudo-mark of a call block inside such a section (read by the family's call grammar, then
#: :data:`ITEMS` follows)
CALL_IN = "\x00section-call"



class Tokens:
    """A family's tokens, all starting with the same text (``<｜``, ``<|``): where the next one is,
    in time linear in the distance to it. (:func:`~replay.parsers._markers.first_marker` searches
    a token that is absent to the end of the text, once per block: a whole-text parse of many
    blocks was quadratic whenever a family lists a token it never writes, such as Kimi's singular
    section spellings.) Raises ValueError when the tokens share no first character."""

    def __init__(self, tokens: tuple[str, ...]) -> None:
        self.tokens = tokens
        self.lead = commonprefix(list(tokens))
        if not self.lead:
            raise ValueError(f"tokens {tokens!r} share no first character")
        self.longest = max(len(t) for t in tokens)

    def next(self, text: str, start: int, stop: int | None = None) -> tuple[int, str]:
        """``(index, token)`` of the first token starting in ``[start, stop)`` (``stop`` None: the
        end), the one listed first at equal indices; ``(-1, "")`` when there is none (as
        :func:`~replay.parsers._markers.first_marker`)."""
        lead, find, tokens = self.lead, text.find, self.tokens
        hi = len(text) if stop is None else stop + len(lead) - 1
        j = find(lead, start, hi)
        while j >= 0:
            for t in tokens:
                if text.startswith(t, j):
                    return j, t
            j = find(lead, j + 1, hi)
        return -1, ""

    def cut(self, text: str, start: int, final: bool) -> tuple[int, str]:
        """Where the text from ``start`` stops being plain text on a stream (as
        :func:`~replay.parsers._markers.find_marker`): ``(index, token)`` of the next token, else
        ``(cut, "")`` with ``text[cut:]`` the suffix that may still become one (none when
        ``final``)."""
        i, t = self.next(text, start)
        if i >= 0:
            return i, t
        n = len(text)
        if final:
            return n, ""
        return n - partial_marker_suffix(text[max(start, n - self.longest + 1) :], self.tokens), ""


class TokenWake(MarkerWake):
    """:class:`~replay.parsers._family.MarkerWake` over :class:`Tokens`: the block is read again
    when one of ``tokens`` has arrived (one search for their shared first characters in the new
    text, rather than one per token), at the end of the stream, or the first time."""

    def __init__(self, tokens: Tokens, seek: int) -> None:
        super().__init__(tokens.tokens, seek)
        self._tokens = tokens

    def wake(self, buf: str, final: bool) -> bool:
        """True when the grammar should read the block again (as :meth:`MarkerWake.wake`)."""
        seek = self._seek
        nxt = len(buf) - self._longest + 1
        if nxt > seek:
            self._seek = nxt
        if self._first or final:
            self._first = False
            return True
        return self._tokens.next(buf, seek)[0] >= 0


class SectionParser(GrammarParser):
    """Base of the families whose calls are blocks inside calls sections (module docstring).

    A family sets ``CALL_BEGIN`` (the token that opens a call block), ``SECTION_BEGINS`` /
    ``SECTION_ENDS`` (the section tokens, every spelling), ``CALL_END`` (the token whose arrival
    may complete a call), ``WAKE`` (the tokens whose arrival inside a call block may let its
    grammar decide it) and implements :meth:`read_call`; ``THINK`` / ``IMPLICIT_ENDS`` /
    ``end_tokens`` as for every :class:`~replay.parsers._family.GrammarParser`. ``STARTS`` is
    derived (a call block or a section opens outside).
    """

    CALL_BEGIN: ClassVar[str] = ""
    SECTION_BEGINS: ClassVar[tuple[str, ...]] = ()
    SECTION_ENDS: ClassVar[tuple[str, ...]] = ()
    CALL_END: ClassVar[str] = ""
    #: the tokens read inside a section (a block, the end, a repeated begin); derived
    INSIDE: ClassVar[tuple[str, ...]] = ()
    #: an open head's progress (:meth:`_section`); set per instance when there is one
    _resume: tuple[int, int, list[ToolCall | str]] | None = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.CALL_BEGIN:
            cls.STARTS = (cls.CALL_BEGIN, *cls.SECTION_BEGINS)
            cls.INSIDE = (cls.CALL_BEGIN, *cls.SECTION_ENDS, *cls.SECTION_BEGINS)
            cls._inside = Tokens(cls.INSIDE)
            cls._wake_tokens = Tokens(cls.WAKE)
            cls._head_tokens = Tokens((cls.CALL_END, *cls.SECTION_ENDS))

    def read_call(self, text: str, s: int, final: bool) -> tuple[int, list[ToolCall] | None] | None:  # pragma: no cover
        """The family's call grammar: the block at the ``CALL_BEGIN`` at ``text[s]`` ->
        ``(end, [call])`` or ``(end, None)`` (no call: its text ``text[s:end]`` is content); None
        on a stream's prefix (``final`` False) when more text could change the answer."""
        raise NotImplementedError

    def call_wake(self, seek: int) -> MarkerWake:
        """When an open call block is read again: when one of ``WAKE`` arrives (searched from
        ``seek``, just after ``CALL_BEGIN``); a family whose header ends at other text overrides it."""
        return TokenWake(self._wake_tokens, seek)

    def wake(self, mark: str) -> MarkerWake:
        """The wake of each kind of block (:meth:`call_wake` for a call block; a section head
        wakes when ``CALL_END`` or a section end arrives; items at every delta)."""
        self._resume = None  # a new block opens: the last head's progress is no longer its
        if mark == ITEMS:
            return EveryDelta()
        if mark == CALL_IN or mark == self.CALL_BEGIN:
            return self.call_wake(len(self.CALL_BEGIN))
        return TokenWake(self._head_tokens, len(mark))

    def read(self, text: str, s: int, mark: str, final: bool):  # type: ignore[override]
        """The grammar (module docstring): a bare call block at ``CALL_BEGIN``, a section's head at
        a begin token, the rest of a section that holds a call at :data:`ITEMS` / :data:`CALL_IN`."""
        if mark == self.CALL_BEGIN:
            return self.read_call(text, s, final)
        if mark == ITEMS or mark == CALL_IN:
            return self._section(text, s, s, final, mark)
        resume = self._resume
        if not final and resume is not None and resume[0] == s:
            return self._section(text, s, resume[1], final, "", resume[2])
        return self._section(text, s, s + len(mark), final, "")

    def _section(self, text: str, s: int, p: int, final: bool, mark: str, out: list[ToolCall | str] | None = None):
        """Read a section from ``p`` as far as the text decides it: its items in order (text and
        blocks that are no call: content, verbatim; calls; begin tokens repeated inside it:
        dropped) up to its end token, the end of the text, or (on a prefix) the first item not yet
        decided. ``mark``: "" for the head (``text[s:p]`` the begin token; no call yet: the answer
        waits for the first call, and a section that ends with none is content verbatim, tokens
        included), else :data:`ITEMS` / :data:`CALL_IN` (a call came before ``s``). The answer
        holds the content and calls read; it is followed by :data:`CALL_IN` when it stops at an
        undecided call block, by :data:`ITEMS` when it stops at text that may start a token.

        A head that cannot be answered yet on a stream's prefix leaves its progress (where its
        undecided part starts, the content read before it) in ``self._resume``; the engine reads
        the same growing text at the same index until the block is decided and opens a new block
        (:meth:`wake`, which clears it) only after, so the next read resumes there (``out``): a
        head is read once, however many blocks that are no call come before its first call."""
        inside, call_begin, n = self._inside, self.CALL_BEGIN, len(text)
        if out is None:
            out = []
        have = bool(mark)  # a call came in this section
        while True:
            i, m = inside.cut(text, p, final)
            if i > p:
                out.append(text[p:i])
            if not m:  # the text ends (final), or may start a token at i
                if not have:
                    if final:
                        return n, None
                    self._resume = (s, i, out)
                    return None
                if final:
                    return n, out
                return (i, out, ITEMS) if i > s else None
            if m == call_begin:
                got = self.read_call(text, i, final)
                if got is None:  # a call block still open (only on a prefix)
                    if not have:
                        self._resume = (s, i, out)
                        return None
                    if i == s and mark == CALL_IN:
                        return None
                    return i, out, CALL_IN
                p, calls = got
                if calls is None:
                    out.append(text[i:p])
                else:
                    out.extend(calls)
                    have = True
                continue
            p = i + len(m)
            if m in self.SECTION_ENDS:
                return (p, out) if have else (p, None)
            # a begin token repeated inside the section: framing
