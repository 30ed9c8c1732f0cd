"""Split a leading reasoning section (``<think>...</think>``) off a completion, whole or streamed.

The rule, shared by every family that reasons in tags (Qwen3, DeepSeek, GLM, MiniMax, Kimi K2
Thinking, Seed-OSS with its own tags), as vLLM's and SGLang's reasoning parsers apply it before the
tool parser sees the text:

- the reasoning section starts at the very beginning of the output: either the generation prompt
  opened it (``open=True``, the prompt ends with the start tag) or the output begins with the start
  tag, after optional whitespace;
- it ends at the first end tag; the end tag is dropped, and so is the whitespace right after it
  (``</think>\\n\\n``) — the rest is the body the tool parser reads;
- a start tag anywhere later is not reasoning (it is body text); an output that never closes its
  reasoning is reasoning to the end (no content, no calls);
- the reasoning text is kept verbatim (between the tags);
- a family may name *implicit ends* (Kimi K2's section-begin tokens, after vLLM): inside the
  reasoning section such a marker before any end tag ends the reasoning there, and the body starts
  at the marker (it is kept).

The streaming splitter returns exactly what :func:`split_reasoning` returns for the joined text,
under any chunking: it holds back a suffix that may be the start of a tag and the whitespace after
the end tag until they are decided.
"""

from __future__ import annotations

from replay.parsers._markers import first_marker, partial_marker_suffix

THINK = ("<think>", "</think>")


def split_reasoning(
    text: str, tags: tuple[str, str] = THINK, *, open: bool = False, implicit_ends: tuple[str, ...] = ()
) -> tuple[str, str]:
    """``(reasoning, body)`` of a whole completion under the module's rule (chars in, chars out)."""
    start, end = tags
    if not open:
        j = 0
        if text[:1].isspace():
            j = len(text) - len(text.lstrip())
        if not text.startswith(start, j):
            return "", text
        text = text[j + len(start) :]
    e, mark = first_marker(text, (end, *implicit_ends))
    if e < 0:
        return text, ""
    if mark != end:  # an implicit end stays in the body
        return text[:e], text[e:]
    return text[:e], text[e + len(end) :].lstrip()


class ReasoningSplitter:
    """The streaming form of :func:`split_reasoning`: ``feed(delta)`` and ``finish()`` each return
    ``(reasoning fragment, body fragment)``; the fragments join to what :func:`split_reasoning`
    gives for the joined deltas."""

    def __init__(self, tags: tuple[str, str] = THINK, *, open: bool = False, implicit_ends: tuple[str, ...] = ()) -> None:
        self.start, self.end = tags
        self._ends = (self.end, *implicit_ends)
        self.state = "in" if open else "head"  # head -> in -> gap -> body
        self.buf = ""

    def feed(self, delta: str) -> tuple[str, str]:
        if self.state == "body":
            return "", delta  # past the reasoning section (the common delta): all body
        self.buf += delta
        reasoning: list[str] = []
        body: list[str] = []
        while True:
            if self.state == "head":
                stripped = self.buf.lstrip()
                if stripped.startswith(self.start):
                    self.buf = stripped[len(self.start) :]
                    self.state = "in"
                    continue
                if self.start.startswith(stripped):  # only whitespace and a tag prefix so far
                    break
                self.state, body_text, self.buf = "body", self.buf, ""
                body.append(body_text)
                break
            if self.state == "in":
                e, mark = first_marker(self.buf, self._ends)
                if e >= 0:
                    reasoning.append(self.buf[:e])
                    if mark != self.end:  # an implicit end: the body starts at it
                        body.append(self.buf[e:])
                        self.buf, self.state = "", "body"
                        break
                    self.buf = self.buf[e + len(self.end) :]
                    self.state = "gap"
                    continue
                keep = partial_marker_suffix(self.buf, self._ends)
                reasoning.append(self.buf[: len(self.buf) - keep])
                self.buf = self.buf[len(self.buf) - keep :]
                break
            if self.state == "gap":
                rest = self.buf.lstrip()
                if rest:
                    self.state = "body"
                    body.append(rest)
                self.buf = ""
                break
            body.append(self.buf)
            self.buf = ""
            break
        return "".join(reasoning), "".join(body)

    def finish(self) -> tuple[str, str]:
        """Release what is held back at the end of the stream."""
        buf, self.buf = self.buf, ""
        if self.state == "head":
            stripped = buf.lstrip()
            if stripped.startswith(self.start):  # cannot happen: feed would have moved on
                return stripped[len(self.start) :], ""
            return "", buf
        if self.state == "in":
            return buf, ""
        return "", ""
