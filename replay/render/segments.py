"""Token ids of a prompt from cached segments: the ids of a whole ``encode``, without encoding the same text twice.

A prompt of a multi-turn agent request is mostly text seen before: the system prompt and tool
block repeat in every request of an agent, and each request carries the history of the previous
one. Encoding a long prompt whole each time is costly; this module
cuts the prompt at positions where the tokenizer's own pipeline treats the two sides
independently, encodes each distinct piece once, and keeps its ids in an LRU bounded in bytes.

**Where a prompt may be cut.** Hugging Face ``tokenizers`` encodes a text in this order
(``TokenizerImpl::encode_single_sequence``): the added vocabulary's tokens are extracted first
(``AddedVocabulary::extract_and_normalize``: tokens with ``normalized: false`` matched on the raw
text, leftmost-longest; then each remaining piece is normalized on its own and tokens with
``normalized: true`` are matched in it); each remaining piece is pre-tokenized and modelled on
its own (``PreTokenizedString::split``, then ``tokenize`` per split); with
``add_special_tokens=False`` the post-processor adds nothing. So:

1. **added-token cuts** (mode ``added-tokens``): both ends of a ``normalized: false`` added token
   are cuts for any normalizer (HF normalizes the pieces between them separately); both ends of
   a ``normalized: true`` token are cuts when the normalizer is the identity (none, or an empty
   ``Sequence``); tokens with ``lstrip``/``rstrip``/``single_word`` disable the mode (they reach
   across the cut), and so does a pre-tokenizer that looks at a piece's position (``Metaspace``
   with ``prepend_scheme: first``) or one this module does not know;
2. **line cuts** (mode ``segments``): inside a piece, after a ``"\\n"`` followed by a character
   that is not whitespace, when the normalizer is the identity, the model is BPE without dropout,
   and the pre-tokenizer is one of :data:`LINE_SAFE_SPLITS` (``Split`` regexes, ``Isolated``)
   followed by ``ByteLevel`` without prefix space and without its own regex. Each of those regexes
   is read here by hand: no match of any alternative holds a ``"\\n"`` followed by a character
   outside ``\\s`` (the alternatives that can hold a newline, ``\\s*[\\r\\n]+``, ``\\s+``,
   ``[\\r\\n]*`` at the end of a punctuation run, hold only whitespace after it), so every match
   ends at such a position; the ``\\n`` itself is always matched (``\\s*[\\r\\n]+`` matches it),
   so no gap spans it; and the one lookahead, ``\\s+(?!\\S)``, is only tried where
   ``\\s*[\\r\\n]+`` failed, which cannot happen on a whitespace run that reaches the ``\\n``: the
   matches left of the cut are the same whether the text goes on or ends there. ByteLevel and
   BPE work per pre-token. The GPT-2 regex (``ByteLevel`` with ``use_regex``) is *not* line-safe:
   ``"  \\nX"`` splits as ``"  "``, ``"\\n"`` but ``"  \\n"`` alone stays whole.

A tokenizer none of this fits is encoded whole (mode ``whole``); :attr:`SegmentEncoder.reason`
says why. At construction a probe (:func:`probe_texts`: the tokenizer's added tokens between
words, newlines, spaces, digits, CJK, marks) is encoded both ways, and any difference falls
back to ``whole``; ``tests/test_segments.py`` checks ids from segments against whole encodes on
the benchmark's capture and on renders of the corpus templates.
"""

from __future__ import annotations

import array
import json
import os
import re
import sys
from typing import Any

__all__ = ["LINE_SAFE_SPLITS", "SegmentEncoder", "segment_encoder", "probe_texts", "CACHE_BYTES"]

#: Bytes of cached segments (text and ids) kept per tokenizer and process.
CACHE_BYTES = 48 << 20
#: Texts whose pieces another text may begin with are found by their first HEAD characters (an
#: agent's system prompt and the start of its tool block): the last PER_HEAD texts of each of the
#: last HEADS heads are kept.
HEAD = 2048
HEADS = 32
PER_HEAD = 3

#: ``Split`` regexes (``behavior: Isolated``, ``invert: false``) after which a ``"\\n"`` followed by
#: a non-whitespace character is always a pre-token boundary (see the module docstring for the
#: reading of each). Keys are the regex strings exactly as ``tokenizer.json`` holds them.
LINE_SAFE_SPLITS: dict[str, str] = {
    # DeepSeek V3 / V3.1 / V3.2 / V4 (three splits: digits, CJK, then this)
    "\\p{N}{1,3}": "digit runs of 1-3 (no newline)",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+": "CJK runs (no newline)",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+":
        "DeepSeek V3/V4 words: a newline is followed in a match only by [\\r\\n]* or whitespace",
    # Qwen2 / Qwen2.5 / Qwen3
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+":
        "Qwen2/3: as DeepSeek's, digits one by one",
    # Llama 3 / cl100k-style with digit triples
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+":
        "Llama 3: as Qwen2's, digit triples",
}

#: Pre-tokenizer types that treat each piece between added tokens alone, whatever its position.
_POSITION_FREE = {"ByteLevel", "Split", "Whitespace", "WhitespaceSplit", "Punctuation", "Digits", "BertPreTokenizer", "CharDelimiterSplit", "UnicodeScripts"}

# A cut after "\n" when the next character is surely not whitespace for the tokenizer's regex
# engine: Python's \s (str.isspace) covers Unicode White_Space and more; U+180E, U+200B and U+FEFF
# were whitespace in older Unicode versions, so they are never taken as the character after a cut.
_LINE_CUT = re.compile("\n(?=[^\\s\u180e\u200b\ufeff])")


def _identity_normalizer(n: Any) -> bool:
    return n is None or (n.get("type") == "Sequence" and not n.get("normalizers"))


def _pretokenizers(p: Any) -> list[dict[str, Any]] | None:
    if p is None:
        return []
    if p.get("type") == "Sequence":
        out: list[dict[str, Any]] = []
        for q in p.get("pretokenizers") or []:
            sub = _pretokenizers(q)
            if sub is None:
                return None
            out.extend(sub)
        return out
    return [p]


def _line_safe(pres: list[dict[str, Any]]) -> str | None:
    """None when the pre-tokenizer sequence admits line cuts, else why not."""
    if not pres or pres[-1].get("type") != "ByteLevel":
        return "the pre-tokenizer does not end with ByteLevel"
    last = pres[-1]
    if last.get("add_prefix_space") or last.get("use_regex"):
        return "ByteLevel adds a prefix space or splits with the GPT-2 regex (not line-safe)"
    for p in pres[:-1]:
        pat = (p.get("pattern") or {}).get("Regex") if p.get("type") == "Split" else None
        if pat is None or p.get("behavior") != "Isolated" or p.get("invert"):
            return f"pre-tokenizer {p.get('type')} is not a known line-safe split"
        if pat not in LINE_SAFE_SPLITS:
            return "a Split regex this module has not read"
    return None


def _trie_regex(words: list[str]) -> re.Pattern[str] | None:
    """A regex matching any of ``words``, the longest at the leftmost position (as
    ``aho-corasick``'s ``LeftmostLongest``, which HF's added vocabulary uses): a trie whose longer
    branches are tried first."""
    if not words:
        return None
    trie: dict[str, Any] = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = True

    def build(node: dict[str, Any]) -> str:
        end = "" in node
        alts = [re.escape(ch) + build(sub) for ch, sub in node.items() if ch != ""]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if end else body

    return re.compile(build(trie))


class _TokenFinder:
    """The leftmost-longest matches of a :func:`_trie_regex` of ``words`` in ``text[a:b]``, as
    ``pattern.finditer(text, a, b)`` gives them (spans of the matches, in order), found faster:
    a match can only start at a word's first character, so when the words start with few
    distinct characters their occurrences are found with ``str.find`` (a fast scan in C) and the
    regex is tried, anchored, only there. A scan with the pattern itself tries every position."""

    #: At most this many distinct first characters are looked for one by one.
    MAX_FIRST = 4

    def __init__(self, words: list[str]) -> None:
        self.pattern = _trie_regex(words)
        firsts = sorted({w[0] for w in words if w})
        self.firsts = firsts if len(firsts) <= self.MAX_FIRST else None

    def spans(self, text: str, a: int, b: int) -> list[tuple[int, int]]:
        """``[m.span() for m in pattern.finditer(text, a, b)]`` (no word is empty: no empty match)."""
        pattern = self.pattern
        if pattern is None:
            return []
        if self.firsts is None:
            return [m.span() for m in pattern.finditer(text, a, b)]
        if len(self.firsts) == 1:
            starts: Any = self._positions(text, self.firsts[0], a, b)
        else:
            starts = sorted(p for ch in self.firsts for p in self._positions(text, ch, a, b))
        out: list[tuple[int, int]] = []
        pos = a
        match = pattern.match
        for p in starts:
            if p < pos:
                continue
            m = match(text, p, b)
            if m is not None:
                out.append((p, m.end()))
                pos = m.end()
        return out

    @staticmethod
    def _positions(text: str, ch: str, a: int, b: int) -> list[int]:
        out = []
        find = text.find
        i = find(ch, a, b)
        while i != -1:
            out.append(i)
            i = find(ch, i + 1, b)
        return out


def _encode_texts(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """``[tokenizer.encode(t, add_special_tokens=False).ids for t in texts]``, through
    ``encode_batch_fast`` (the same ids, without the offsets nobody reads here) and on this thread:
    unless the user set ``TOKENIZERS_PARALLELISM``, it is off during the call (the pool's processes
    already use every core; the tokenizer's own threads cost more CPU for the same ids)."""
    batch = getattr(tokenizer, "encode_batch_fast", None) or tokenizer.encode_batch
    if _PARALLELISM in os.environ:
        return [e.ids for e in batch(texts, add_special_tokens=False)]
    os.environ[_PARALLELISM] = "false"
    try:
        return [e.ids for e in batch(texts, add_special_tokens=False)]
    finally:
        os.environ.pop(_PARALLELISM, None)


_PARALLELISM = "TOKENIZERS_PARALLELISM"


class SegmentEncoder:
    """Token ids of texts with a ``tokenizers.Tokenizer``, from cached segments when that is exact.

    ``tokenizer``: a Hugging Face ``tokenizers.Tokenizer``. ``cache_bytes``: bound of the segment
    cache (text and ids, estimated bytes; segments not used for longest go first, by generations).

    ``mode``: ``segments`` (added-token and line cuts), ``added-tokens`` (added-token cuts only) or
    ``whole`` (every text encoded whole); ``reason``: why not ``segments``.
    :meth:`ids` returns what ``tokenizer.encode(text, add_special_tokens=False).ids`` returns;
    :meth:`count` its length. ``hits``/``misses`` count segments.
    """

    def __init__(self, tokenizer: Any, cache_bytes: int = CACHE_BYTES) -> None:
        self.tokenizer = tokenizer
        self.cache_bytes = cache_bytes
        self._young: dict[str, array.array] = {}
        self._old: dict[str, array.array] = {}
        self._young_bytes = self._old_bytes = 0
        self.hits = 0
        self.misses = 0
        self.missed_chars = 0
        self.mode, self.reason = "whole", ""
        self._pass1: _TokenFinder | None = None
        self._pass2: _TokenFinder | None = None
        self._lines = False
        self._last: tuple[str, list[str], list[Any]] | None = None  # the last text's (text, pieces, ids)
        self._heads: dict[str, tuple[Any, ...]] = {}  # the same, of recent texts by their first HEAD chars (newest first)
        self._tails = False  # other texts' pieces may be reused (see _shared_head, _shared_tail)
        self._analyse()
        if self.mode != "whole":
            bad = next((t for t in probe_texts(tokenizer) if self._segmented(t) != self._whole(t)), None)
            if bad is not None:
                self.mode, self.reason = "whole", f"probe differs from a whole encode on {bad[:60]!r}"
                self._pass1 = self._pass2 = None
                self._lines = False
            self._young, self._old = {}, {}
            self._young_bytes = self._old_bytes = 0
            self.hits = self.misses = self.missed_chars = 0
            self._last = None
            self._heads = {}

    def _analyse(self) -> None:
        tok = self.tokenizer
        try:
            normalizer = json.loads(tok.normalizer.__getstate__()) if tok.normalizer is not None else None
            pre = json.loads(tok.pre_tokenizer.__getstate__()) if tok.pre_tokenizer is not None else None
            added = [a for _, a in sorted(tok.get_added_tokens_decoder().items())]
            model, dropout = type(tok.model).__name__, getattr(tok.model, "dropout", None)
            limits = tok.truncation or tok.padding
        except Exception as exc:  # noqa: BLE001 - not a tokenizers.Tokenizer we can read
            self.reason = f"tokenizer configuration unreadable ({type(exc).__name__})"
            return
        if getattr(tok, "encode_special_tokens", False):
            self.reason = "encode_special_tokens is set (added tokens are not extracted)"
            return
        if limits:
            self.reason = "truncation or padding is set"
            return
        if dropout:
            self.reason = "BPE dropout (ids are random)"
            return
        if any(a.lstrip or a.rstrip or a.single_word for a in added):
            self.reason = "an added token with lstrip/rstrip/single_word reaches across a cut"
            return
        pres = _pretokenizers(pre)
        if pres is None:
            self.reason = "unknown pre-tokenizer"
            return
        for p in pres:
            kind = p.get("type")
            if kind == "Metaspace" and p.get("prepend_scheme", "always") in ("always", "never"):
                continue
            if kind not in _POSITION_FREE:
                self.reason = f"pre-tokenizer {kind} may depend on a piece's position"
                return
        identity = _identity_normalizer(normalizer)
        raw = [a.content for a in added if not a.normalized and a.content]
        norm = [a.content for a in added if a.normalized and a.content]
        self._pass1 = _TokenFinder(raw) if raw else None
        self._pass2 = _TokenFinder(norm) if identity and norm else None
        self.mode = "added-tokens"
        why = None if identity else "the normalizer is not the identity"
        if why is None and model != "BPE":
            why = f"model {model} (line cuts are read for BPE only)"
        if why is None:
            why = _line_safe(pres)
        if why is None:
            self._lines = True
            self.mode = "segments"
            self._tails = not any("\n" in a.content for a in added)
        else:
            self.reason = why if identity or not norm else why + "; normalized added tokens are not cut"

    # ------------------------------------------------------------------ cutting
    def cuts(self, text: str) -> list[str]:
        """The pieces of ``text`` (their concatenation is ``text``) that are encoded independently."""
        if self.mode == "whole" or not text:
            return [text] if text else []
        # (start, end, is an added token) spans covering text
        spans: list[tuple[int, int, bool]] = []
        pos = 0
        if self._pass1 is not None:
            for a, b in self._pass1.spans(text, 0, len(text)):
                if pos < a:
                    spans.append((pos, a, False))
                spans.append((a, b, True))
                pos = b
        if pos < len(text):
            spans.append((pos, len(text), False))
        if self._pass2 is not None:
            out2: list[tuple[int, int, bool]] = []
            for a, b, tok in spans:
                if tok:
                    out2.append((a, b, tok))
                    continue
                p = a
                for x, y in self._pass2.spans(text, a, b):
                    if p < x:
                        out2.append((p, x, False))
                    out2.append((x, y, True))
                    p = y
                if p < b:
                    out2.append((p, b, False))
            spans = out2
        if not self._lines:
            return [text[a:b] for a, b, _ in spans]
        finditer = _LINE_CUT.finditer
        pieces: list[str] = []
        for a, b, tok in spans:
            if not tok:
                for m in finditer(text, a, b):
                    e = m.end()
                    pieces.append(text[a:e])
                    a = e
            pieces.append(text[a:b])
        return pieces

    # ------------------------------------------------------------------ encoding
    def _whole(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def _segmented(self, text: str) -> list[int]:
        out: list[int] = []
        for seg in self._pieces(text):
            out.extend(seg)
        return out

    def _pieces(self, text: str) -> list[array.array]:
        """The ids of each piece of ``text`` (:meth:`cuts`). Where ``text`` begins as a recent text
        with the same first :data:`HEAD` characters did (an agent's system prompt and tool block,
        and the history its previous request carried) and ends as the last text did (the old and
        new sides' prompts of one exchange differ in the tool block only), those pieces and ids
        are that text's; only the middle is cut and looked up (:func:`_shared_head`,
        :func:`_shared_tail` say where that is exact)."""
        if not self._tails:
            return self._lookup(self.cuts(text))
        n = len(text)
        x1, head_segs, head_ids = 0, [], []
        key = text[:HEAD]
        recent = self._heads.get(key, ())
        for cand in recent:  # the old and new sides' prompts of an agent's requests share a head
            if cand[0] is text:
                self.hits += len(cand[2])
                return cand[2]
            shared = _shared_head(text, cand[1])
            if shared is not None and shared[0] > x1:
                x1, i = shared
                head_segs, head_ids = cand[1][:i], cand[2][:i]
        x2, tail_segs, tail_ids = n, [], []
        last = self._last
        if last is not None and last[0] is not text:
            shared = _shared_tail(text, last[1], x1)
            if shared is not None:
                x2, j = shared
                tail_segs, tail_ids = last[1][j:], last[2][j:]
        mid_segs = self.cuts(text[x1:x2] if x1 or x2 < n else text)
        got = head_ids + self._lookup(mid_segs) + tail_ids
        self.hits += len(head_ids) + len(tail_ids)
        self._last = entry = (text, head_segs + mid_segs + tail_segs, got)
        self._heads.pop(key, None)
        self._heads[key] = (entry, *recent[: PER_HEAD - 1])
        if len(self._heads) > HEADS:
            del self._heads[next(iter(self._heads))]
        return got

    def _lookup(self, segs: list[str]) -> list[array.array]:
        """The ids of each of ``segs``, from the cache or encoded now (into the cache)."""
        got: list[Any] = list(map(self._young.get, segs))  # the young generation: one lookup per piece, in C
        if None not in got:
            self.hits += len(segs)
            return got
        old = self._old
        missing: dict[str, None] = {}
        for i, ids in enumerate(got):
            if ids is not None:
                continue
            s = segs[i]
            ids = self._young.get(s)  # an earlier piece of this text may have moved it there
            if ids is None:
                ids = old.pop(s, None)
                if ids is not None:  # used again: into the young generation
                    size = _size(s, ids)
                    self._old_bytes -= size
                    self._add(s, ids, size)
                else:
                    missing[s] = None
                    ids = s
            got[i] = ids
        self.hits += len(segs) - len(missing)
        if missing:
            texts = list(missing)
            self.misses += len(texts)
            self.missed_chars += sum(map(len, texts))
            new = {t: array.array("i", ids) for t, ids in zip(texts, _encode_texts(self.tokenizer, texts))}
            for t, ids in new.items():
                self._add(t, ids, _size(t, ids))
            got = [new[g] if type(g) is str else g for g in got]
        return got

    def _add(self, text: str, ids: array.array, size: int) -> None:
        """Into the young generation; when it holds half the bound it becomes the old one (whose
        entries not used since are dropped): an LRU by generations, within ``cache_bytes``."""
        if 2 * size > self.cache_bytes:
            return
        self._young[text] = ids
        self._young_bytes += size
        if 2 * self._young_bytes > self.cache_bytes:
            self._old, self._old_bytes = self._young, self._young_bytes
            self._young, self._young_bytes = {}, 0

    @property
    def cached_bytes(self) -> int:
        """Estimated bytes the cached segments hold (text and ids), at most ``cache_bytes``."""
        return self._young_bytes + self._old_bytes

    def ids(self, text: str) -> list[int]:
        """``tokenizer.encode(text, add_special_tokens=False).ids`` (list of int)."""
        if self.mode == "whole":
            return self._whole(text)
        return self._segmented(text)

    def count(self, text: str) -> int:
        """``len(self.ids(text))``: the number of tokens of ``text`` (no BOS/EOS added)."""
        if self.mode == "whole":
            return len(self._whole(text))
        return sum(len(s) for s in self._pieces(text))


def _shared_tail(text: str, pieces: list[str], lo: int = 0) -> tuple[int, int] | None:
    """Where ``text`` may end with the tail of another text's ``pieces`` (its :meth:`SegmentEncoder.cuts`):
    ``(x, j)``, ``x >= lo``, such that ``text[x:]`` is ``"".join(pieces[j:])`` and ``cuts(text)``
    is ``cuts(text[:x]) + pieces[j:]``; None when there is none.

    Exact because ``x`` is a boundary of ``text``'s own cutting: ``_LINE_CUT`` matches at
    ``x - 1`` (a ``"\n"`` before a character that is not whitespace: a line cut), and no added
    token holds a ``"\n"`` (the encoder's ``_tails``: no token match can span ``x``), so cutting
    ``text`` at ``x`` first changes no piece; and the pieces of the equal rest are the other
    text's from the boundary ``j`` on (a text's pieces after one of its boundaries are the cuts of
    its rest). The common tail is found piece by piece from the end with ``str.endswith`` (no copy)."""
    pos = len(text)
    k = len(pieces)
    endswith = text.endswith
    while k and pos - len(pieces[k - 1]) >= lo and endswith(pieces[k - 1], 0, pos):
        k -= 1
        pos -= len(pieces[k])
    j, x = k, pos
    cut = _LINE_CUT.match
    while j < len(pieces):
        if x > 0 and cut(text, x - 1) is not None:
            return x, j
        x += len(pieces[j])
        j += 1
    return None


def _shared_head(text: str, pieces: list[str]) -> tuple[int, int] | None:
    """Where ``text`` may begin with the head of another text's ``pieces``: ``(x, i)``, ``x > 0``,
    such that ``text[:x]`` is ``"".join(pieces[:i])`` and ``cuts(text)`` is ``pieces[:i] +
    cuts(text[x:])``; None when there is none. Exact for the reasons :func:`_shared_tail` gives:
    ``x`` is a line cut of ``text`` (``_LINE_CUT`` matches at ``x - 1``) and the other text's
    pieces before one of its boundaries are the cuts of its head."""
    pos, i, n = 0, 0, len(pieces)
    startswith = text.startswith
    while i < n and startswith(pieces[i], pos):
        pos += len(pieces[i])
        i += 1
    cut = _LINE_CUT.match
    while i > 0:
        if cut(text, pos - 1) is not None:
            return pos, i
        i -= 1
        pos -= len(pieces[i])
    return None


def _size(text: str, ids: array.array) -> int:
    """Estimated bytes of one cache entry: the text, the ids (4 bytes each) and the dict slots."""
    return sys.getsizeof(text) + 4 * len(ids) + 180


def probe_texts(tokenizer: Any, limit: int = 64) -> list[str]:
    """Texts that exercise every kind of cut: up to ``limit`` of the tokenizer's added tokens
    (the longest, and tokens that are prefixes of others) glued to words, spaces, newlines, digits,
    CJK, combining marks and each other."""
    try:
        added = [a.content for a in tokenizer.get_added_tokens_decoder().values() if a.content]
    except Exception:  # noqa: BLE001
        added = []
    added = sorted(set(added), key=lambda s: (-len(s), s))
    picked = added[: limit // 2] + [a for a in added if any(b != a and b.startswith(a) for b in added[:200])][: limit // 4] + added[-(limit // 4):]
    tails = ["Hello", " world", "\n", "\n\n", " \n", "  \n", "\r\n", "\nX", "\n x", "12345", "\u4f60\u597d", "e\u0301", "\t", "!?", "", " "]
    out = []
    for i, tok in enumerate(picked):
        a, b = tails[i % len(tails)], tails[(i * 7 + 3) % len(tails)]
        out.append(f"{a}{tok}{b}{tok}\n{a}")
    out += [
        "line one\nline two\n  indented\n\ttab\n\n\nafter blanks\n 12 34567\n{\"a\": 1}\n</x>\n",
        "  \nX  \n\nY \r\nZ\n\u00a0W\n\u2003V\n\u4f60\u597d\n\u0301mark\n123\n!\n?x\n",
        "def f(x):\n    return x\n\nclass A:\n    pass\n# comment\n- item\n* item\n1. one\n",
    ]
    return out


_ENCODERS: dict[int, tuple[Any, SegmentEncoder]] = {}


def segment_encoder(tokenizer: Any) -> SegmentEncoder | None:
    """The process's :class:`SegmentEncoder` of ``tokenizer`` (built at the first call), or None
    for an object that is not a ``tokenizers.Tokenizer`` (mistral-common's text tokenizer, a
    plugin's): those are encoded by their own ``encode``."""
    got = _ENCODERS.get(id(tokenizer))
    if got is not None and got[0] is tokenizer:
        return got[1]
    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - tokenizers is a core dependency
        return None
    if not isinstance(tokenizer, Tokenizer):
        return None
    enc = SegmentEncoder(tokenizer)
    _ENCODERS[id(tokenizer)] = (tokenizer, enc)
    return enc
