"""Secrets out, and (with ``--redact``) message text hashed: pure functions applied to every row at ingest.

:mod:`replay.capture.ingest` passes every ``exchanges`` row, its ``tools`` rows and every
``ingest_errors`` row through this module before anything is written, whatever reader made them,
so no capture format can bring a secret into a run folder by a path of its own.

**Secrets** (always on). Three rules:

1. *Key-like text* (:func:`scrub_text`): anywhere in any string of a row (request JSON, message
   text, tool declarations, the logged prompt, the raw completion, served content and calls, extra
   JSON columns a reader adds), a substring that has the shape of a credential is replaced by
   ``[redacted:<kind>]``: OpenAI/Anthropic ``sk-…`` keys, ``Bearer``/``Basic`` credentials, AWS
   access key ids (``AKIA…``/``ASIA…``), JWTs (``eyJ….eyJ….…``), GitHub (``ghp_…``,
   ``github_pat_…``), Slack (``xox?-…``), Google (``AIza…``), Hugging Face (``hf_…``), Stripe
   (``sk_live_…``) tokens, PEM private keys, the password of a URL (``https://user:pw@host``) and
   the value of a secret-named URL query parameter (``?api_key=…``). The replacement is the same
   in every column, so a key in a message is replaced identically in the logged prompt and a
   render of the messages still equals it. Shapes need a digit where words could pass for one
   (``Bearer authentication`` and ``sk-learn-is-great`` are text, not keys). Matches are taken
   left to right, the first rule (in :data:`_KEY_RULES` order) that matches at a position winning;
   a shape whose check fails (a query parameter whose name is not a secret's) is left as it is and
   hides nothing that starts inside it. Linear time: an RE2 set of each rule's literal parts (its
   gate) tells in one pass which rules can match in a row (scanning the capture line itself for v1
   lines) and in each string, and only those rules' regexes run, each from its literal start and
   only where its gate matched (Hyperscan reports where; with the RE2 fallback, over the string).
2. *Secret names* (:func:`is_secret_name`), in the envelope only: in JSON a row holds (the request
   body and the JSON columns readers add: headers, metadata), a key whose name is a secret's is
   dropped with its value, as is a header in list form (``{"name": "Authorization", "value": …}``
   as HAR writes it, or ``["Cookie", "…"]``). A name is a secret's when, split into words
   (``x-api-key``, ``apiKey``, ``API_KEY`` -> ``api key``), it holds one of ``authorization``,
   ``authentication``, ``auth``, ``cookie(s)``, ``password``, ``passwd``, ``passphrase``, ``pwd``,
   ``secret(s)``, ``credential(s)``, ``apikey``, ``privatekey``, ``jwt``, ``bearer``; or ends with
   ``token`` (singular: ``access_token``, ``x-auth-token``, not ``max_tokens``, nor ``token_budget``,
   nor tokenizer terms ``eos_token``, ``pad_token``, ``bos_token``…); or ends with ``key`` after
   ``api``, ``access``, ``secret``, ``private``, ``auth``, ``signing``, ``encryption``, ``master``,
   ``client``, ``subscription``, ``service``, ``account``, ``session``, ``admin``, ``license``.
   A bare ``key`` or ``id`` is not a secret.
3. *Where names do not count*: inside ``messages``, ``input``, ``system``, ``instructions``,
   ``prompt``, ``tools``, ``functions``, ``tool_choice``, ``response_format``, ``text`` and
   any ``parameters``, ``input_schema``, ``properties``, ``schema``, ``json_schema``,
   ``arguments``, ``content``, the names are the developer's (a tool parameter named ``api_key``
   or ``token``) or the model's (a tool call's arguments), not the request's: they are kept, and
   rule 1 alone applies there. The tool declarations the audit is about are therefore never
   altered except for a key-like string inside them.

What was dropped is counted (:class:`Redactions`, reported as ``ingest.redactions`` in
``run.json``), never stored. A bad line's ``excerpt`` and ``detail`` in ``ingest_errors`` go
through :func:`scrub_excerpt`: rule 1, and the value after a secret name in the forms
``"name": value``, ``{"name": "N", "value": "V"}``, ``Name: value`` and ``name=value``.

**--redact** (:func:`hash_messages`): every message string is replaced by
``[redacted sha256:<12 hex> chars:<n>]`` (a SHA-256 prefix of its UTF-8 bytes, unsalted so equal
texts give equal markers, and its length in characters): message ``content`` strings and text
parts, ``system``, ``instructions``, ``input``, a legacy ``prompt``, reasoning, refusals, tool
results. Kept: roles, ``type``, ids, tool-call and participant ``name``, numbers and booleans, the
list/object structure, and the tool declarations (``tools`` is untouched). Tool-call arguments keep
their JSON shape: each string value inside them is hashed, keys, numbers and booleans are kept, so
``{"path": "a"}`` stays a JSON object with key ``path`` and arguments that were not JSON stay not
JSON (the whole text is hashed). ``served_content`` is hashed and ``served_tool_calls`` arguments are
treated as tool-call arguments. ``server_prompt``, ``server_output_text``, ``server_steps`` and the
token ids of both are dropped (null): a marker in their place would be read as text by the render
and re-stream stages and yield wrong counts, and token ids decode back to the text. An empty
string stays empty. A bad line's excerpt is replaced by a marker of the excerpt, and prose quoted
in its detail is hashed (:func:`redact_error`).

What the checks still do under ``--redact``: null leaks and render failures (tools are kept
whole); old-vs-new prompt divergence (both sides render the same hashed messages; token counts are
those of the markers, not of the original text); the served-stream checks (calls received, their
names, non-JSON joins, ``finish_reason``, and the ``served_*`` columns of
:mod:`replay.capture.served`, computed from the captured text before this module runs). What they cannot do: re-streaming (dropped calls,
argument mismatches, replay fidelity) and the served-vs-reference prompt comparison need the raw
completion and the logged prompt; capture without ``--redact`` in a place allowed to hold them.

One concern at over 600 lines: the privacy rule applied to every row at ingest. The three secret
rules, the ``--redact`` hashing and the column plan share one gate scan per row (the key shapes'
literal parts found in one pass over the capture line), so they are read and tested together:
split, a new column or capture format could pass one rule and miss another.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import orjson
import re2

from replay import exactjson
from replay.tables import EXCHANGES

__all__ = [
    "Redactions",
    "hash_arguments",
    "hash_messages",
    "hash_text",
    "is_secret_name",
    "redact_exchange",
    "redact_error",
    "scrub_excerpt",
    "scrub_json",
    "scrub_json_text",
    "scrub_text",
]

#: Counts of what was removed, by kind (``name`` for a field or header dropped by its name,
#: ``value:<kind>`` for a key-like substring replaced, ``hashed`` for message strings hashed under
#: ``--redact``, ``raw-dropped`` for the logged prompt / raw completion / steps dropped under it,
#: ``steps-dropped`` for an exchange whose recorded steps the scrub dropped because a replacement in
#: the raw completion made them no longer join to it: its ``recorded`` chunking is lost).
Redactions = Counter

# --------------------------------------------------------------------------- names

_SECRET_WORDS = frozenset(
    {
        "authorization", "authentication", "auth", "cookie", "cookies", "password", "passwd",
        "passphrase", "pwd", "secret", "secrets", "credential", "credentials", "apikey",
        "privatekey", "jwt", "bearer",
    }
)
_KEY_QUALIFIERS = frozenset(
    {
        "api", "access", "secret", "private", "auth", "signing", "encryption", "master", "client",
        "subscription", "service", "account", "session", "admin", "license",
    }
)
# "<word> token" that names a vocabulary item, not a credential
_TOKENIZER_WORDS = frozenset(
    {"eos", "bos", "pad", "unk", "sep", "cls", "mask", "stop", "start", "end", "special", "next", "image",
     "audio", "video", "think", "tool", "call", "begin", "first", "last", "max", "min", "num"}
)
_WORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(name)]


_NAME_CACHE: dict[str, bool] = {}


def is_secret_name(name: str) -> bool:
    """True when a field or header named ``name`` holds a secret (rule 2 of the module docstring).

    ``name``: a JSON key or header name, any case and separator (``X-Api-Key``, ``apiKey``,
    ``api_key``). ``max_tokens``, ``token_budget``, ``eos_token``, ``key``, ``session_id``: False;
    ``Authorization``, ``Set-Cookie``, ``access_token``, ``client_secret``, ``AWS_SECRET_ACCESS_KEY``,
    ``Ocp-Apim-Subscription-Key``: True.
    """
    hit = _NAME_CACHE.get(name)
    if hit is not None:
        return hit
    words = _words(name)
    hit = False
    if words:
        if any(w in _SECRET_WORDS for w in words):
            hit = True
        elif words[-1] == "token":
            hit = len(words) == 1 or words[-2] not in _TOKENIZER_WORDS
        elif words[-1] == "key" and len(words) >= 2:
            hit = words[-2] in _KEY_QUALIFIERS
        elif "".join(words) in {"apikey", "xapikey", "accesskey", "secretkey", "privatekey"}:
            hit = True
    if len(_NAME_CACHE) < 100_000:
        _NAME_CACHE[name] = hit
    return hit


# --------------------------------------------------------------------------- key-like text


def _has_digit(s: str) -> bool:
    return any(c.isdigit() for c in s)


def _basic_ok(token: str) -> bool:
    """A ``Basic`` credential is base64 of ``user:password``."""
    try:
        return b":" in base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False


# (kind, pattern, check on the matched text or None, gate). No pattern may match `"` or `\`, so a
# replacement inside JSON text keeps it JSON. The gate is an RE2 pattern that finds a superset of
# the places where the rule can match, in the text itself, in JSON text holding it (orjson's, whose
# only escapes are `\"`, `\\` and control characters) and in a raw capture line without `\/` or
# `\u` escapes of ASCII (:func:`_raw_is_plain`): the rule's literal parts, its classes widened to
# admit `\`, bounds dropped, `\b` and the check left out. Only rules whose gate matches ever run.
_KEY_RULES: list[tuple[str, str, Callable[[str], bool] | None, str]] = [
    ("pem", r"-----BEGIN [A-Z ]{0,30}PRIVATE KEY-----[^\"]*?(?:-----END [A-Z ]{0,30}PRIVATE KEY-----|(?=\")|\Z)", None,
     r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    # a tab in JSON text is the escape `\t` (`\\t` in JSON text holding that text): the gates take every spelling
    ("bearer", r"(?i:\bbearer)[ \t]+[A-Za-z0-9._~+/-]{12,}=*", _has_digit, r"(?i)bearer(?:[ \t]|\\+t)+[A-Za-z0-9._~+/-]{12}"),
    # Python's case-insensitive match also takes U+017F for s and U+0130/U+0131 for i
    ("basic", r"(?i:\bbasic)[ \t]+[A-Za-z0-9+/]{8,}=*", lambda s: _basic_ok(s.split()[-1]), "(?i)ba(?:s|\u017f)(?:i|\u0130|\u0131)c(?:[ \t]|\\\\+t)+[A-Za-z0-9+/]{8}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", None, r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\."),
    ("stripe", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", None, r"[rs]k_(?:live|test)_[A-Za-z0-9]{16}"),
    ("sk", r"\bsk-[A-Za-z0-9_-]{20,}", _has_digit, r"sk-[A-Za-z0-9_-]{20}"),
    ("aws", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", None, r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    ("github", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})", None, r"gh[pousr]_[A-Za-z0-9]{30}|github_pat_[A-Za-z0-9_]{40}"),
    ("slack", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", None, r"xox[abposr]-[A-Za-z0-9-]{10}"),
    ("google", r"\bAIza[0-9A-Za-z_-]{35}", None, r"AIza[0-9A-Za-z_-]{35}"),
    ("hf", r"\bhf_[A-Za-z0-9]{30,}", None, r"hf_[A-Za-z0-9]{30}"),
    ("url-password", r"(?<=://)[^/\s:@\"\\]{1,256}:[^/\s@\"\\]{1,256}(?=@)", None, r'://[^/\s:@"]+:[^/\s@"]+@'),
    # the gate: a name holding a word every secret name holds (is_secret_name), then "="
    ("query", r"(?<=[?&])[A-Za-z0-9_.-]{1,64}=[^&#\s\"\\]+", lambda s: is_secret_name(s.split("=", 1)[0]),
     r"[?&][A-Za-z0-9_.-]*(?i:auth|cookie|passw|passphrase|pwd|secret|credential|jwt|bearer|token|key)[A-Za-z0-9_.-]*="),
]


def _fast_form(pattern: str) -> tuple[str, int]:
    """The rule's ``pattern`` rewritten so that Python's regex engine can skip to its literal start
    (a pattern opening with ``\\b`` or a lookbehind is tried at every position): ``\\bLIT`` becomes
    ``LIT`` followed by a lookbehind that the character before it is not a word character (the same
    condition); ``(?<=P)`` becomes ``P`` consumed and the match itself in group 1. Returns the new
    pattern and the length of what is consumed before the match (0, or the lookbehind's width)."""
    for lead in ("://", "[?&]"):
        if pattern.startswith(f"(?<={lead})"):
            return f"{lead}({pattern[len(lead) + 5:]})", 3 if lead == "://" else 1
    if pattern.startswith("(?i:\\b"):  # (?i:\bword)...
        word = pattern[len("(?i:\\b"):pattern.index(")")]
        return f"(?i:{word})(?<!\\w.{{{len(word)}}}){pattern[pattern.index(')') + 1:]}", 0
    if pattern.startswith("\\b"):
        body = pattern[2:]
        m = re.match(r"\(\?:([^()]*)\)|\[[a-z]+\][a-z_]+|[A-Za-z_-]+", body)
        head = m.group(0)
        if m.group(1) is not None:  # \\b(?:A|B)...: the alternatives' common literal start goes first
            alts = m.group(1).split("|")
            lit = re.match(r"[A-Za-z0-9_-]*", os.path.commonprefix(alts)).group(0)
            if lit:
                rest = "|".join(a[len(lit):] for a in alts)
                return f"{lit}(?<!\\w.{{{len(lit)}}})(?:{rest}){body[len(head):]}", 0
        else:
            width = len(re.sub(r"\[[a-z]+\]", "x", head))
            return f"{head}(?<!\\w.{{{width}}}){body[len(head):]}", 0
    return pattern, 0


#: Each rule's regex as it runs (:func:`_fast_form`), and what it consumes before its match.
_RULE_RES: list[re.Pattern] = []
_RULE_LEADS: list[int] = []
for _, _pat, _, _ in _KEY_RULES:
    _fp, _lead = _fast_form(_pat)
    _RULE_RES.append(re.compile(_fp))
    _RULE_LEADS.append(_lead)


def _gate_set(patterns: list[str]) -> "re2.Set":
    s = re2.Set.SearchSet()
    for pat in patterns:
        s.Add(pat)
    s.Compile()
    return s


class _HyperscanGates:
    """The gates as one Hyperscan block-mode database: the same answer as the RE2 set (a rule's
    gate matches or not), found about 3x faster (Hyperscan's multi-literal engine reads ~2 GB/s of
    capture text on one core here, RE2's set DFA ~0.75 GB/s). Patterns are compiled byte-wise (no
    UTF-8 mode, so invalid UTF-8 input is still defined): each gate's classes exclude ASCII bytes
    only, so a byte-wise class matches every byte of a code point it matches, and the gates stay
    supersets of their rules; ``(?i)`` becomes Hyperscan's caseless flag (ASCII folding; the
    non-ASCII folds Python's ``re`` applies are spelled out in the gates themselves)."""

    def __init__(self, patterns: list[str], spans: bool = False) -> None:
        import hyperscan

        exprs, flags = [], []
        # spans: every match reported with its leftmost start (:meth:`Spans`); else one report per gate
        each = hyperscan.HS_FLAG_SOM_LEFTMOST if spans else hyperscan.HS_FLAG_SINGLEMATCH
        for pat in patterns:
            caseless = pat.startswith("(?i)")
            exprs.append((pat[4:] if caseless else pat).encode("utf-8"))
            flags.append(each | (hyperscan.HS_FLAG_CASELESS if caseless else 0))
        self.db = _cached_database(hyperscan, exprs, flags)
        self.scratch = hyperscan.Scratch(self.db)  # one per process: scans never run concurrently here

    @staticmethod
    def _hit(i: int, start: int, end: int, flags: int, found: set) -> None:
        found.add(i)

    @staticmethod
    def _span(i: int, start: int, end: int, flags: int, found: dict) -> None:
        found.setdefault(i, []).append((start, end))

    def Spans(self, data: bytes) -> dict[int, list[tuple[int, int]]]:  # noqa: N802 - as Match
        """Per gate that matches in ``data`` (UTF-8 bytes), each of its matches as ``(start, end)``
        byte offsets: every offset at which a match ends, with the leftmost start of the matches
        ending there (Hyperscan's ``SOM_LEFTMOST``), so that every match's start lies in
        ``[start, end)`` of some pair. Only for a database made with ``spans=True``."""
        found: dict = {}
        self.db.scan(data, match_event_handler=self._span, context=found, scratch=self.scratch)
        return found

    def Match(self, data: str | bytes) -> list[int]:  # noqa: N802 - the RE2 Set method it stands for
        if isinstance(data, str):
            data = data.encode("utf-8")  # lone surrogates: UnicodeEncodeError, as RE2 raises
        found: set = set()
        self.db.scan(data, match_event_handler=self._hit, context=found, scratch=self.scratch)
        return list(found)


def cache_dir() -> Path:
    """Where replay keeps what it can rebuild (compiled Hyperscan databases): ``$REPLAY_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/replay``, else ``~/.cache/replay``."""
    if os.environ.get("REPLAY_CACHE_DIR"):
        return Path(os.environ["REPLAY_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "replay"


def _cached_database(hyperscan: Any, exprs: list[bytes], flags: list[int]) -> Any:
    """The block-mode database of ``exprs`` (ids 0..n-1) with ``flags``: loaded from :func:`cache_dir`
    when an earlier process compiled the same patterns with the same Hyperscan (a file read), else
    compiled (far dearer, and paid by every ``replay`` process that ingests) and
    saved there for the next. A cache that cannot be read or written is compiled past, silently:
    the database is the same either way (a file for another CPU fails to load and is rebuilt)."""
    key = hashlib.sha256(repr((hyperscan.__version__, exprs, flags)).encode()).hexdigest()[:24]
    path = cache_dir() / f"gates-{key}.hsdb"
    try:
        return hyperscan.loadb(path.read_bytes(), mode=hyperscan.HS_MODE_BLOCK)
    except Exception:  # noqa: BLE001 - absent, truncated, another platform's: compile it
        pass
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=flags)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_bytes(hyperscan.dumpb(db))
        os.replace(tmp, path)  # atomic: a process reading it never sees half a file
    except Exception:  # noqa: BLE001 - a read-only home: no cache, same database
        pass
    return db


def _gates(patterns: list[str]) -> Any:
    """Hyperscan when it is installed and compiles every gate, else the RE2 set (same answers;
    ``REPLAY_GATES=re2`` forces RE2)."""
    if os.environ.get("REPLAY_GATES") != "re2":
        try:
            return _HyperscanGates(patterns)
        except Exception:  # noqa: BLE001 - not installed for this platform, or a pattern it rejects
            pass
    return _gate_set(patterns)


def _span_gates(patterns: list[str]) -> "_HyperscanGates | None":
    """The gates as a Hyperscan database that reports where each match is
    (:meth:`_HyperscanGates.Spans`), or None where :func:`_gates` would use RE2 (whose set tells
    which patterns match, not where): the rules then search the whole text."""
    if os.environ.get("REPLAY_GATES") != "re2":
        try:
            return _HyperscanGates(patterns, spans=True)
        except Exception:  # noqa: BLE001 - as _gates
            pass
    return None


# a `\/` or a `\u` escape of an ASCII character (or of U+0130, U+0131, U+017F: see "basic") in raw
# JSON can hide a gate's literal; a raw line holding one is gated on its decoded strings instead
_ESCAPE = r"\\(?:/|u00[0-7][0-9a-fA-F]|u013[01]|u017[fF])"
_RAW_ESCAPE = re2.compile(_ESCAPE.encode())
#: One pass over a text tells which rules can match in it (linear time, any number of rules).
_GATES = _gates([g for *_, g in _KEY_RULES])
#: The same for a raw capture line, with one more pattern (id ``len(_KEY_RULES)``): an escape that
#: makes the line unfit for gating (:func:`_raw_is_plain`), found in the same pass.
_LINE_GATES = _gates([*(g for *_, g in _KEY_RULES), _ESCAPE])
_ALL_RULES = tuple(range(len(_KEY_RULES)))
_ESCAPE_ID = len(_KEY_RULES)
#: The gates again, telling where they match (:func:`_gate_spans`); None without Hyperscan.
_SPAN_GATES = _span_gates([g for *_, g in _KEY_RULES])


def _rules_in(data: str | bytes) -> tuple[int, ...]:
    """The indices (in :data:`_KEY_RULES` order) of the rules whose gate matches in ``data``;
    every rule when the text cannot be encoded as UTF-8 (lone surrogates)."""
    try:
        hits = _GATES.Match(data)
    except (UnicodeError, TypeError):
        return _ALL_RULES
    return tuple(sorted(hits)) if hits else ()


def _line_rules(raw: bytes) -> tuple[int, ...] | None:
    """:func:`_rules_in` of a raw capture line, or None when the line is not plain
    (:func:`_raw_is_plain`): both from one pass (:data:`_LINE_GATES`)."""
    try:
        hits = _LINE_GATES.Match(raw)
    except (UnicodeError, TypeError):
        return None
    if not hits:
        return ()
    if _ESCAPE_ID in hits:
        return None
    return tuple(sorted(hits))


def _raw_is_plain(raw: bytes) -> bool:
    """True when the gates can be run on the raw JSON line ``raw`` itself (no escape that could hide a literal)."""
    return b"\\" not in raw or _RAW_ESCAPE.search(raw) is None


def _replacement(kind: str, text: str) -> str:
    if kind == "query":
        return text.split("=", 1)[0] + "=[redacted:query]"
    return f"[redacted:{kind}]"


def _gate_spans(text: str, data: bytes | None = None) -> tuple[tuple[int, ...], dict[int, list[tuple[int, int]]] | None]:
    """:func:`_rules_in` of ``text`` and, per rule found, where its gate matched: sorted, disjoint
    ``[start, end)`` character offsets of ``text`` such that every match of the rule's regex (as it
    runs, :func:`_fast_form`) starts inside one of them. That holds because each gate matches,
    from the same first character, wherever its rule's regex does (every gate is its rule's
    literal start followed by a relaxation of the rest, see :data:`_KEY_RULES`; ``query``'s gate
    only where the check can pass, and a match whose check fails changes nothing), and
    :meth:`_HyperscanGates.Spans` reports every gate match's end with a start at or before it.
    The spans are None (search the whole text) without Hyperscan, or when an offset is not at a
    character boundary (not expected: every gate starts and ends on an ASCII byte). ``data``:
    ``text`` encoded as UTF-8, when the caller has it (else it is encoded here)."""
    if _SPAN_GATES is None:
        return _rules_in(text if data is None else data), None
    if data is None:
        try:
            data = text.encode("utf-8")
        except UnicodeError:  # lone surrogates: every rule, everywhere
            return _ALL_RULES, None
    found = _SPAN_GATES.Spans(data)
    if not found:
        return (), None
    rules = tuple(sorted(found))
    if not text.isascii():  # byte offsets -> character offsets, one pass over the bytes
        at: dict[int, int] = {}
        prev = chars = 0
        try:
            for off in sorted({o for pairs in found.values() for pair in pairs for o in pair}):
                chars += len(data[prev:off].decode("utf-8"))
                at[off] = chars
                prev = off
        except UnicodeDecodeError:
            return rules, None
        found = {i: [(at[a], at[b]) for a, b in pairs] for i, pairs in found.items()}
    spans = {}
    for i, pairs in found.items():
        merged: list[list[int]] = []
        for a, b in sorted(pairs):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        spans[i] = [(a, b) for a, b in merged]
    return rules, spans


#: A gate span at most this long is tried position by position (``match``); a longer one is searched.
_MATCH_LOOP_MAX = 256


def _search(i: int, text: str, pos: int, spans: list[tuple[int, int]] | None = None) -> tuple[int, int] | None:
    """The span of rule ``i``'s first match starting at ``pos`` or later, else None. ``spans``
    (:func:`_gate_spans`): where the rule's matches can start; the regex is tried only there
    (the same answer as searching the whole text, without reading the text in between)."""
    lead = _RULE_LEADS[i]
    rx = _RULE_RES[i]
    q0 = max(0, pos - lead)  # where the regex as it runs (with its lead) may start
    if spans is None:
        m = rx.search(text, q0)
    else:
        m = None
        for a, b in spans:
            if b <= q0:
                continue
            q = max(a, q0)
            if b - q > _MATCH_LOOP_MAX:
                m = rx.search(text, q)  # the first match at q or later (none starts in [q0, q))
                break
            for q in range(q, b):
                m = rx.match(text, q)
                if m is not None:
                    break
            if m is not None:
                break
    if m is None:
        return None
    return m.span(1) if lead else m.span()


def _scrub_rules(text: str, rules: tuple[int, ...], counts: Counter | None,
                 spans: dict[int, list[tuple[int, int]]] | None = None) -> str:
    """Rule 1 with the rules ``rules`` only (those whose gate matched). Left to right, as one
    alternation of the rules in :data:`_KEY_RULES` order would: at each position the first rule
    that matches there wins and the scan goes on after its match; a match whose check fails
    (``Bearer`` words without a digit, a query parameter whose name is not a secret's) is not
    replaced and does not hide what starts inside it. Each rule's regex runs on its own from its
    literal start (:func:`_fast_form`), so no alternation is tried at every position; given
    ``spans`` (:func:`_gate_spans`), only where its gate matched."""

    def sp_of(i: int) -> list[tuple[int, int]] | None:
        return None if spans is None else spans.get(i, [])

    heap = []
    for i in rules:
        sp = _search(i, text, 0, sp_of(i))
        if sp is not None:
            heap.append((sp[0], i, sp[1]))
    if not heap:
        return text
    heapq.heapify(heap)
    out: list[str] = []
    pos = 0
    while heap:
        start, i, end = heapq.heappop(heap)
        kind, _, check, _ = _KEY_RULES[i]
        if start < pos:  # inside a replaced match: this rule's next match from there
            sp = _search(i, text, pos, sp_of(i))
        elif check is not None and not check(text[start:end]):
            sp = _search(i, text, start + 1, sp_of(i))
        else:
            out.append(text[pos:start])
            out.append(_replacement(kind, text[start:end]))
            if counts is not None:
                counts[f"value:{kind}"] += 1
            pos = end
            sp = _search(i, text, pos, sp_of(i))
        if sp is not None:
            heapq.heappush(heap, (sp[0], i, sp[1]))
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def scrub_text(text: str, counts: Counter | None = None) -> str:
    """``text`` with every key-like substring replaced by ``[redacted:<kind>]`` (rule 1).

    ``counts``: incremented by ``value:<kind>`` per replacement. Deterministic and idempotent; a
    replacement never contains ``"`` or ``\\``, so JSON text stays JSON. Returns ``text`` itself
    when nothing matched. Linear time: one pass of the gates finds the rules that can match and
    where (:func:`_gate_spans`), and only those run, only there (:func:`_scrub_rules`).
    """
    return _scrub_encoded(text, None, counts)


def _scrub_encoded(text: str, data: bytes | None, counts: Counter | None) -> str:
    """:func:`scrub_text` of ``text``, gated on ``data`` (``text`` as UTF-8 bytes, or None)."""
    rules, spans = _gate_spans(text, data)
    if not rules:
        return text
    return _scrub_rules(text, rules, counts, spans)


# --------------------------------------------------------------------------- JSON

#: Keys under which field names are the developer's or the model's, not secrets (rule 3).
NAME_FREE_KEYS = frozenset(
    {
        "messages", "input", "system", "instructions", "prompt", "tools", "functions", "tool_choice",
        "response_format", "text", "parameters", "input_schema", "properties", "schema", "json_schema",
        "arguments", "content",
    }
)


def _header_pair_name(item: Any) -> str | None:
    """The header name of a header in list form, else None."""
    if isinstance(item, dict) and isinstance(item.get("name"), str) and "value" in item and len(item) <= 4:
        return item["name"]
    if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], str):
        return item[0]
    return None


def scrub_json(value: Any, counts: Counter | None = None, *, names: bool = True) -> Any:
    """``value`` (decoded JSON) with secrets removed, in place where it is a container; returns it.

    Key-like substrings of every string are replaced (rule 1); with ``names`` (the envelope), a key
    that :func:`is_secret_name` and a header pair in list form naming one are dropped, except under
    :data:`NAME_FREE_KEYS` (rules 2 and 3). Iterative: any nesting depth. ``counts``: ``name`` per
    key or pair dropped, ``value:<kind>`` per substring replaced.
    """
    if isinstance(value, str):
        return scrub_text(value, counts)
    if not isinstance(value, (dict, list)):
        return value
    stack: list[tuple[Any, bool]] = [(value, names)]
    while stack:
        node, env = stack.pop()
        if isinstance(node, dict):
            for k in list(node):
                v = node[k]
                if env and isinstance(k, str) and is_secret_name(k):
                    del node[k]
                    if counts is not None:
                        counts["name"] += 1
                    continue
                if isinstance(v, str):
                    new = scrub_text(v, counts)
                    if new is not v:
                        node[k] = new
                elif isinstance(v, (dict, list)):
                    stack.append((v, env and k not in NAME_FREE_KEYS))
        else:
            if env:
                keep = []
                for item in node:
                    hn = _header_pair_name(item)
                    if hn is not None and is_secret_name(hn):
                        if counts is not None:
                            counts["name"] += 1
                        continue
                    keep.append(item)
                if len(keep) != len(node):
                    node[:] = keep
            for i, v in enumerate(node):
                if isinstance(v, str):
                    new = scrub_text(v, counts)
                    if new is not v:
                        node[i] = new
                elif isinstance(v, (dict, list)):
                    stack.append((v, env))
    return value


# in the lower-cased JSON text: when none occurs, no key or header pair can be a secret's
_NAME_GATE_WORDS = ("auth", "cookie", "passw", "passphrase", "pwd", "secret", "credential", "jwt", "bearer", 'token"', 'key"')


def _drop_secret_names(value: Any) -> int:
    """Rules 2-3 alone, in place: the envelope's secret-named keys and header pairs dropped;
    :data:`NAME_FREE_KEYS` subtrees and strings are not visited. Returns how many were dropped
    (each a ``name`` in :data:`Redactions`)."""
    dropped = 0
    cache = _NAME_CACHE
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k in list(node):
                hit = cache.get(k) if type(k) is str else None  # is_secret_name's own cache, without the call
                if hit is None:
                    hit = isinstance(k, str) and is_secret_name(k)
                if hit:
                    del node[k]
                    dropped += 1
                elif k not in NAME_FREE_KEYS and isinstance(node[k], (dict, list)):
                    stack.append(node[k])
        else:
            keep = []
            for item in node:
                hn = _header_pair_name(item)
                if hn is not None and is_secret_name(hn):
                    dropped += 1
                    continue
                keep.append(item)
                if isinstance(item, (dict, list)):
                    stack.append(item)
            if len(keep) != len(node):
                node[:] = keep
    return dropped


def scrub_json_text(text: str, counts: Counter | None = None, *, names: bool = True, values: bool = True) -> str:
    """JSON text with secrets removed (rules 1-3), re-serialized only when a key was dropped.

    Rule 1 runs on the text itself (a replacement keeps JSON valid); the text is decoded for rules
    2 and 3 only when a secret-like name occurs in it. Text that is not JSON gets rule 1 alone.
    Key order is kept (orjson). ``values=False`` skips rule 1 (the caller knows no key-like text
    is there).
    """
    if values:
        text = scrub_text(text, counts)
    if not names:
        return text
    low = text.lower()
    if not any(w in low for w in _NAME_GATE_WORDS):
        return text
    try:
        obj = exactjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    dropped = _drop_secret_names(obj)
    if not dropped:
        return text
    if counts is not None:
        counts["name"] += dropped
    return exactjson.dumps(obj).decode()


# --------------------------------------------------------------------------- --redact


def hash_text(text: str) -> str:
    """``[redacted sha256:<first 12 hex digits> chars:<len(text)>]`` for a message string; ``""`` stays ``""``."""
    if not text:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"[redacted sha256:{digest} chars:{len(text)}]"


def _hc(text: str, counts: Counter | None) -> str:
    """:func:`hash_text`, counted as ``hashed`` when the text was not empty."""
    if text and counts is not None:
        counts["hashed"] += 1
    return hash_text(text)


#: In a message, string values of these keys are structure and are kept by :func:`hash_messages`.
KEEP_KEYS = frozenset(
    {"role", "type", "name", "id", "tool_call_id", "tool_use_id", "call_id", "status", "media_type",
     "format", "detail", "index", "signature", "encrypted_content", "cache_control", "finish_reason",
     "stop_reason", "object", "model"}
)
#: Envelope keys whose value is message text (hashed by :func:`hash_messages`).
TEXT_KEYS = frozenset(
    {"messages", "message", "input", "system", "instructions", "prompt", "content", "delta", "output",
     "output_text", "reasoning_content", "refusal", "partial_json", "thinking", "choices", "completion"}
)


def _hash_strings(value: Any, counts: Counter | None, *, keep_keys: bool) -> Any:
    """Every string in ``value`` hashed (in place for containers), the values of :data:`KEEP_KEYS`
    kept when ``keep_keys``; ``arguments`` strings by :func:`hash_arguments`. Iterative."""
    if isinstance(value, str):
        return _hc(value, counts)
    stack = [value]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in list(items):
            if isinstance(v, str):
                if keep_keys and isinstance(node, dict) and k in KEEP_KEYS:
                    continue
                if isinstance(node, dict) and k == "arguments":
                    node[k] = hash_arguments(v, counts)
                else:
                    node[k] = _hc(v, counts)
            elif isinstance(v, (dict, list)):
                if keep_keys and isinstance(node, dict) and k == "cache_control":
                    continue
                stack.append(v)
    return value


def hash_arguments(arguments: str, counts: Counter | None = None) -> str:
    """Tool-call arguments (JSON text) with each string value hashed; keys, numbers, booleans, nulls
    and the shape kept. Arguments that are not JSON are hashed whole (and stay not JSON)."""
    try:
        obj = exactjson.loads(arguments)
    except orjson.JSONDecodeError:
        return _hc(arguments, counts)
    obj = _hash_strings(obj, counts, keep_keys=False)
    try:
        return exactjson.dumps(obj).decode()
    except TypeError:  # too deep to write back
        return _hc(arguments, counts)


def hash_messages(value: Any, counts: Counter | None = None) -> Any:
    """Decoded request (or response / event) JSON with its message text hashed (``--redact``).

    Walks the envelope (iteratively); the value of a key in :data:`TEXT_KEYS` is hashed: a string
    whole, a container string by string keeping :data:`KEEP_KEYS` values (roles, types, ids,
    names) and hashing tool-call ``arguments`` by :func:`hash_arguments`. Everything else (model,
    sampling options, ``tools``, ``response_format``, ``tool_choice``) is kept. Returns ``value``
    (modified in place when a container).
    """
    if not isinstance(value, (dict, list)):
        return value
    stack = [value]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in list(items):
            if isinstance(node, dict) and k in TEXT_KEYS:
                if isinstance(v, str):
                    node[k] = _hc(v, counts)
                elif isinstance(v, (dict, list)):
                    _hash_strings(v, counts, keep_keys=True)
            elif isinstance(node, dict) and k == "arguments" and isinstance(v, str):
                node[k] = hash_arguments(v, counts)
            elif isinstance(node, dict) and k in ("tools", "functions", "response_format", "tool_choice"):
                continue
            elif isinstance(v, (dict, list)):
                stack.append(v)
    return value


# --------------------------------------------------------------------------- rows

#: Columns that drop out under ``--redact``: read as text by the render and re-stream stages, or
#: token ids a tokenizer decodes back to the text.
RAW_TEXT_COLUMNS = ("server_prompt", "server_prompt_token_ids", "server_output_text", "server_output_token_ids", "server_steps")
#: Columns holding captured JSON text besides those ending in ``_json``.
_JSON_COLUMNS = frozenset({"headers", "request_headers", "response_headers", "metadata"})
#: ``tools_json`` is the text of the request's tools inside ``request_json``: never scrubbed on its
#: own; ingest takes it again from the scrubbed request when the scrub rewrote the request
#: (:func:`replay.capture.ingest`), so it always equals what ``request_json`` holds.
_KEEP_COLUMNS = frozenset({"exchange_id", "source_file", "route", "model", "ts", "tools_json"})


def _is_json_column(name: str) -> bool:
    return name.endswith("_json") or name in _JSON_COLUMNS


#: Columns whose strings are those of the capture line as decoded (the request re-serialized, the
#: server's text): on a v1 line they are gated by the line itself (see :func:`redact_exchange`).
_VERBATIM_COLUMNS = frozenset({"request_json", "server_prompt", "server_output_text", "server_steps",
                               "server_prompt_token_ids", "server_output_token_ids"})


#: Columns whose strings, on a v1 line, are the line's own decoded strings (or a constant of the
#: reader): the line's gate covers them. The served content and calls are not among them: they
#: are joined from stream deltas, and a key split across two deltas is whole only once joined.
_LINE_GATED = _VERBATIM_COLUMNS | _KEEP_COLUMNS | {"capture_format", "capture_lacks"}
#: The ``exchanges`` columns (the keys of a row made by replay.capture.v1): of them, only
#: ``request_json`` is JSON text.
_EXCHANGE_COLUMNS = frozenset(EXCHANGES.names)
#: The ``exchanges`` columns a v1 line's gate does not cover (made from it, not copied), in table order.
_DERIVED_COLUMNS = tuple(c for c in EXCHANGES.names if c not in _LINE_GATED)
assert [c for c in _EXCHANGE_COLUMNS - _KEEP_COLUMNS if _is_json_column(c)] == ["request_json"]


def _row_rules(row: dict, tools: Any, raw: bytes | None = None) -> tuple[int, ...]:
    """The rules of rule 1 that can match in some string of the row or its tools (their gates, one
    pass): over ``raw`` (the capture line the row was parsed from, when its escapes allow, see
    :func:`_raw_is_plain`) plus the columns made from it (served content and calls, checks), else
    over the row and tools serialized by orjson (a ``bytes`` value, JSON text as ingest keeps
    ``request_json``, gated as it is). ``tools``: rows (dicts) or a shared
    :class:`replay.capture.v1.ToolList`. ``()``: rule 1 has nothing to do in this row."""
    line = _line_rules(raw) if raw is not None else None
    if line is not None:
        # numbers and booleans hold no text; the columns of _LINE_GATED hold the line's own strings
        keys = _DERIVED_COLUMNS if row.keys() <= _EXCHANGE_COLUMNS else (k for k in row if k not in _LINE_GATED)
        derived = {k: v for k in keys if (v := row.get(k)) is not None and type(v) is not int and type(v) is not bool}
        if not derived:
            return line
        try:
            blob = exactjson.dumps(derived, default=str)
        except TypeError:
            return _ALL_RULES
        return tuple(sorted(set(line) | set(_rules_in(blob)))) if len(blob) > 2 else line
    texts = {k: v for k, v in row.items() if not isinstance(v, bytes)}
    try:
        blob = exactjson.dumps([texts, list(getattr(tools, "cols", tools))], default=str)
    except TypeError:
        return _ALL_RULES
    hits = set(_rules_in(blob))
    for v in row.values():
        if isinstance(v, bytes):
            hits.update(_rules_in(v))
    return tuple(sorted(hits))


def _row_may_hold_key(row: dict, tools: list[dict]) -> bool:
    """False when no string of the row or its tools can hold a key-like substring (one RE2 pass
    over the row serialized by orjson, instead of a test per string)."""
    return bool(_row_rules(row, tools))


def _container_may_hold_key(value: Any) -> bool:
    """False when no string of ``value`` (a list or dict of a row: steps, served calls) can hold a
    key-like substring: one RE2 pass over it serialized, instead of one per string. (A gate's
    match inside a string is a match inside the serialized whole.)"""
    try:
        return bool(_rules_in(exactjson.dumps(value)))
    except TypeError:
        return True


def _same(text: str, counts: Counter | None = None) -> str:
    return text


def redact_exchange(
    row: dict, tools: Any, *, hash_text_too: bool = False, counts: Counter | None = None, raw: bytes | None = None,
    request: Any = None,
) -> Any:
    """Remove secrets from one ``exchanges`` row and its ``tools`` rows, in place; returns the
    tools to write: ``tools`` itself, or, when ``tools`` is a shared
    :class:`replay.capture.v1.ToolList` (never modified) whose declarations a scrub changed, a new
    list of their columns (dicts).

    JSON text columns (``request_json``, any ``*_json``, ``headers``, ``metadata``) by
    :func:`scrub_json_text` (rules 1-3), other strings and lists/structs (served calls, steps) by
    rule 1; ``exchange_id``, ``source_file``, ``route``, ``model`` and ``ts`` are kept as they are.
    Tool rows: ``tool_json`` by rule 1 only (declarations are never pruned by name). When a
    replacement inside the raw completion makes ``server_steps`` no longer join to it, the steps
    are dropped (counted ``steps-dropped``, once per exchange: the reports say how many exchanges
    lost their recorded chunking). With ``hash_text_too`` (``--redact``), also: message
    text of the JSON columns hashed (:func:`hash_messages`), ``served_content`` hashed,
    ``served_tool_calls`` arguments by :func:`hash_arguments`, :data:`RAW_TEXT_COLUMNS` set to
    None. ``counts``: see :data:`Redactions`. ``raw``: the capture-v1 line (bytes) the row was
    parsed from (:func:`replay.capture.v1.parse_line`), whose decoded strings are those of
    ``request_json``, the ``server_*`` columns and the tools: given, the row-level gate scans it
    instead of serializing the row (the same answer, without a copy of the request).
    ``request``: the decoded request ``request_json`` was serialized from (a dict): given, rules 2-3
    run on it (in place; the text is re-serialized only when a name was dropped) instead of on a
    second decoding of ``request_json``. ``request_json`` may be ``bytes`` (UTF-8 JSON text, as
    ingest keeps it): it stays bytes unless a rule changes it, else it becomes ``str``.
    """
    if hash_text_too:  # dropped first, so neither the key gate nor the scrub reads them
        for col in RAW_TEXT_COLUMNS:
            if row.get(col) is not None:
                row[col] = None
                if counts is not None:
                    counts["raw-dropped"] += 1
    names_done = False
    if isinstance(request, dict) and isinstance(row.get("request_json"), (str, bytes)):
        dropped = _drop_secret_names(request)
        if dropped:
            row["request_json"] = exactjson.dumps(request).decode()
            if counts is not None:
                counts["name"] += dropped
        names_done = True
    st = scrub_text if _row_rules(row, tools, raw) else _same
    if st is _same and not hash_text_too and names_done and row.keys() <= _EXCHANGE_COLUMNS:
        return tools  # no rule 1 to run, names done, no other JSON column: the loop below would change nothing
    # the steps can stop joining to the completion only when rule 1 runs on them
    out, steps = row.get("server_output_text"), row.get("server_steps")
    steps_joined = st is scrub_text and isinstance(out, str) and isinstance(steps, list) and all(isinstance(x, str) for x in steps) and "".join(steps) == out
    for col, val in list(row.items()):
        if val is None or col in _KEEP_COLUMNS:
            continue
        if isinstance(val, bytes):
            if not hash_text_too and names_done and col == "request_json":
                if st is _same:
                    continue  # nothing to do: kept as the bytes it is
                # rule 1 alone (names done): gated on these bytes, kept as they are when nothing matched
                text = val.decode("utf-8")
                new = _scrub_encoded(text, val, counts)
                if new is not text:
                    row[col] = new
                continue
            val = val.decode("utf-8")
        if isinstance(val, str):
            if _is_json_column(col):
                names = col != "tool_json" and not (names_done and col == "request_json")
                val = scrub_json_text(val, counts, names=names, values=st is scrub_text)
                if hash_text_too:
                    try:
                        obj = exactjson.loads(val)
                    except orjson.JSONDecodeError:
                        val = _hc(val, counts)
                    else:
                        val = exactjson.dumps(hash_messages(obj, counts)).decode()
                row[col] = val
            elif hash_text_too and col == "served_content":
                row[col] = _hc(st(val, counts), counts)
            else:
                row[col] = st(val, counts)
        elif isinstance(val, (list, dict)):
            if st is scrub_text and _container_may_hold_key(val):
                scrub_json(val, counts, names=False)
            if hash_text_too and col == "served_tool_calls":
                for call in val:
                    if isinstance(call, dict) and isinstance(call.get("arguments"), str):
                        call["arguments"] = hash_arguments(call["arguments"], counts)
    if steps_joined and row.get("server_steps") is not None and "".join(row["server_steps"]) != row["server_output_text"]:
        # a key split across two steps is replaced in the text but not in the steps: they no
        # longer join to the completion, which the `recorded` chunking needs
        row["server_steps"] = None
        if counts is not None:
            counts["steps-dropped"] += 1
    if st is not scrub_text:
        return tools
    shared = getattr(tools, "cols", None)
    if shared is not None:  # a ToolList: scrubbed into rows of its own only when its text may need it
        if tools.gate is None:
            tools.gate = _rules_in(tools.json)
        if not tools.gate:
            return tools
        if tools.scrubbed is None:  # once per distinct list: the scrub of the same text gives the same rows
            own = [dict(c) for c in shared]
            local: Counter = Counter()
            _scrub_tools(own, local)
            tools.scrubbed = (own if own != list(shared) else tools, local)
        result, local = tools.scrubbed
        if counts is not None:
            counts.update(local)
        return result
    _scrub_tools(tools, counts)
    return tools


def _scrub_tools(tools: list[dict], counts: Counter | None) -> None:
    """Rule 1 on each tool row's ``tool_json`` and ``name``, in place."""
    for t in tools:
        if isinstance(t.get("tool_json"), str):
            t["tool_json"] = scrub_text(t["tool_json"], counts)
        if isinstance(t.get("name"), str):
            t["name"] = scrub_text(t["name"], counts)


# --------------------------------------------------------------------------- bad lines

_PAIR_RES = [
    # "name": "value" / "name": value  (the value may be cut by the excerpt's end)
    re.compile(r'"((?:[^"\\]|\\.){1,100})"(\s*:\s*)("(?:[^"\\]|\\.)*"?|[^,}\]\s{\["]+)'),
    # 'name': 'value' (Python reprs in logs)
    re.compile(r"'([^'\\]{1,100})'(\s*:\s*)('(?:[^'\\]|\\.)*'?|[^,}\]\s{\[']+)"),
]
_HAR_PAIR_RE = re.compile(r'("name"\s*:\s*"([^"\\]{1,100})"\s*,\s*"value"\s*:\s*)("(?:[^"\\]|\\.)*"?)')
_HEADER_LINE_RE = re.compile(r"^(\s*)([A-Za-z0-9_.-]{1,64})(\s*[:=]\s*)(.+)$")


def _pairs(text: str, counts: Counter | None) -> str:
    def one(m: re.Match) -> str:
        if not is_secret_name(m.group(1)):
            return m.group(0)
        if counts is not None:
            counts["name"] += 1
        return f'"{m.group(1)}"{m.group(2)}"[redacted]"'

    for rx in _PAIR_RES:
        text = rx.sub(one, text)

    def har(m: re.Match) -> str:
        if not is_secret_name(m.group(2)):
            return m.group(0)
        if counts is not None:
            counts["name"] += 1
        return f'{m.group(1)}"[redacted]"'

    text = _HAR_PAIR_RE.sub(har, text)
    m = _HEADER_LINE_RE.match(text)
    if m and is_secret_name(m.group(2)):
        if counts is not None:
            counts["name"] += 1
        text = f"{m.group(1)}{m.group(2)}{m.group(3)}[redacted]"
    return text


#: Bytes of a bad line scrubbed before its excerpt is cut (a secret that starts in the excerpt
#: is seen whole as long as it ends within this window).
EXCERPT_WINDOW = 64 << 10


def scrub_excerpt(raw: bytes, chars: int, *, hash_text_too: bool = False, counts: Counter | None = None) -> str:
    """The ``ingest_errors.excerpt`` of a bad line: at most ``chars`` characters, secrets removed.

    ``raw``: the line's bytes (decoded as UTF-8 with replacement). The first :data:`EXCERPT_WINDOW`
    bytes are scrubbed (rule 1 and the value after a secret name, see the module docstring), then
    cut to ``chars`` characters. With ``hash_text_too`` the excerpt is a :func:`hash_text` marker.
    """
    text = raw[:EXCERPT_WINDOW].decode("utf-8", "replace")
    text = _pairs(scrub_text(text, counts), counts)[:chars]
    if hash_text_too and text:
        return _hc(text, counts)
    return text


def redact_error(detail: str | None, counts: Counter | None = None, *, hash_text_too: bool = False) -> str | None:
    """An ``ingest_errors.detail`` (an exception's text, which may quote a value) with secrets removed.

    With ``hash_text_too`` (``--redact``), quoted text that reads like prose (12+ characters with a
    space, or 32+ characters: an exception's repr of a value, which may be message text) is hashed
    too; the readers' own details quote field names, types and short values, which are kept."""
    if detail is None:
        return None
    detail = _pairs(scrub_text(detail, counts), counts)
    if hash_text_too:

        def one(m: re.Match) -> str:
            text = m.group(2)
            if len(text) < 32 and not (len(text) >= 12 and any(c.isspace() for c in text)):
                return m.group(0)  # a field name or a short value
            return m.group(1) + _hc(text, counts) + m.group(1)

        detail = _QUOTED_RE.sub(one, detail)
    return detail


_QUOTED_RE = re.compile(r"""(['"])((?:(?!\1).){4,})\1""")
