"""The render and re-stream stages: ``exchanges.parquet`` in, ``renders``/``streams``/``calls`` out.

Each stage is a batch function, ``(pa.RecordBatch of exchanges, run spec) -> {table: pa.Table}``
(:func:`render_batch`, :func:`stream_batch`); the spec is a :class:`replay.runspec.RunSpec` of plain
values, from which the function builds (once per process) its renderers, tokenizer, serializers and
parsers. :func:`run_stage` moves the batches: it cuts ``exchanges.parquet`` into record batches
within its row groups (a pool process reads its own), writes each result as a part file (atomically: a temporary name, then ``os.replace``) and joins
the parts into the table's one file (``renders.parquet`` ...), so a capture of many GB goes through
in bounded memory and a query never reads a half-written table. Per exchange:

- **render**: serialize the request's tool declarations with each side's tool serializer (old,
  new, reference), find the nulls each serializer wrote that the client never sent, render the
  prompt with the run's renderer, and record its SHA-256, length in chars and (with a tokenizer)
  tokens. When two sides serialize the tools identically the prompt is rendered once: the prompts
  are then identical by construction. A side that cannot serialize or render gets its error on its
  row; the run goes on.
- **re-stream**: for an exchange with a raw completion (``server.output_text``), run the
  reference tool parser's whole-text parse, then each side's parser as a whole-text parse
  (chunking ``parse``, the non-streaming path) and as a streaming parser under every chunking,
  assemble what the client gets as the OpenAI SDK does, and compare each call with the reference.

A side given an interpreter (``--old-python``) runs out of process (:mod:`replay.sides`): its
exchanges go to its worker in batches, and what the worker returns (serialized tools; parse
results and per-step parser events) becomes rows through the same code as an in-process side's
(:func:`replay.judge.judge_side`, :func:`replay.stream.assemble_openai`): the per-row facts are
computed in :mod:`replay.judge`.

Parsers raise; this module catches per exchange and records the error on the row.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from replay import exactjson
from replay import tables
from replay.errors import UsageError
from replay.deadline import ReplayTimeout, deadline, deadlines_installed
from replay.adapters import is_per_family_spec, per_family_parser
from replay.parsers import family_for_model, get_parser
from replay.parsers.base import CallDelta, ParseResult, StreamDelta, ToolCall
from replay.plugin_check import check_parse_result
from replay.prepare.base import openai_tools as _openai_tools
from replay.render.base import RenderError, Renderer, count_tokens  # noqa: F401
from replay.sides import BATCH, BATCH_CHARS, RemoteParser, SideError, WorkerError, open_sides, side_specs
from replay.stream import CHUNKINGS_DEFAULT, ChunkingError, assemble_openai, check_chunking, json_key, new_parser, replay_stream, split, two_way_splits
from replay.tools import get_serializer, leaked_nulls
from replay.judge import judge_side, reference_rows  # noqa: F401  (judge_side: part of this module's API)
from replay.render import http_tokenize
from replay.runspec import AuditConfig  # noqa: F401  (declared with RunSpec, from which it is derived; part of this module's API)

SIDES = ("old", "new", "reference")


#: The request's tool declarations in Chat Completions form (moved to :mod:`replay.prepare.base`).
openai_tools = _openai_tools


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _utf8_safe(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings written as a ``\\uXXXX`` escape."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return "".join(f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, dict):
        return {k: _utf8_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utf8_safe(v) for v in value]
    return value


def iter_exchanges(run_dir: Path, columns: list[str], batch_rows: int) -> Iterator[dict[str, Any]]:
    """Yield the exchanges of a run as dicts of ``columns``, one record batch in memory at a time."""
    pf = pq.ParquetFile(Path(run_dir) / "exchanges.parquet")
    for batch in pf.iter_batches(batch_size=batch_rows, columns=columns):
        yield from batch.to_pylist()




def count_exchanges(run_dir: Path) -> int:
    """Rows in a run's ``exchanges.parquet`` (from the Parquet footer, no data read).

    Raises FileNotFoundError when ``run_dir`` is not a run folder."""
    path = Path(run_dir) / "exchanges.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a run folder: no exchanges.parquet (run `replay ingest` or `replay audit` first)")
    return pq.ParquetFile(path).metadata.num_rows


# ---------------------------------------------------------------------------------------------
# render


def render_exchange(
    ex: dict[str, Any], cfg: AuditConfig, serializers: dict[str, Callable], pre: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The ``renders`` rows of one exchange (:func:`replay.render.exchange.render_rows`: each
    side's preparer, serializer and renderer; leaks judged on the prompt), with this run's
    token-id comparison (:func:`_ids_plan`). ``pre``: ``{side: serialized tools | None |
    WorkerError}`` for the sides serialized out of process. Never raises: a side's failure is its
    row's ``error``.
    """
    from replay.render.exchange import render_rows

    assert cfg.renderer is not None
    return render_rows(ex, cfg, serializers, pre, ids_plan=_ids_plan(cfg), ids_sha=_ids_sha, tokens_differing=tokens_differing)



def _ids_plan(cfg: AuditConfig) -> tuple[Any, str | None]:
    """``(tokenizer for ids, vocabulary name)`` of a run's token-id comparison, or ``(None, None)``.

    Ids are compared when the reference renderer gives ids (a reference encoder with a
    ``tokenizer`` of its vocabulary: mistral-common, Harmony) and no ``--tokenizer`` was given:
    other sides' prompts are then tokenized with the reference's tokenizer (a side whose renderer
    has the same ``vocab`` keeps its own ids)."""
    ref = cfg.reference_renderer or cfg.renderer
    tok = getattr(ref, "tokenizer", None)
    if tok is None or cfg.tokenizer is not None or not hasattr(ref, "render_ids"):
        return http_tokenize.ids_plan(cfg)  # (None, None) unless a side renders on a server
    return tok, getattr(ref, "vocab", None)


def _ids_sha(ids: list[int] | None) -> str | None:
    """SHA-256 hex of token ids written as little-endian int32; None for None."""
    if ids is None:
        return None
    import array

    a = array.array("i", ids)
    if sys.byteorder != "little":
        a.byteswap()
    return hashlib.sha256(a.tobytes()).hexdigest()


def tokens_differing(ids: list[int], ref: list[int]) -> int:
    """Size of the token span where ``ids`` differ from ``ref``: with the common prefix and the
    common suffix (not overlapping) taken off both, the longer of the two middles (tokens).
    0 exactly when equal; a pure insertion or deletion counts its own tokens. A localized change
    (one tool's ``"strict": null``) counts only the tokens around it. O(n)."""
    n, m = len(ids), len(ref)
    p = 0
    while p < n and p < m and ids[p] == ref[p]:
        p += 1
    if p == n == m:
        return 0
    q = 0
    while q < n - p and q < m - p and ids[n - 1 - q] == ref[m - 1 - q]:
        q += 1
    return max(n - p - q, m - p - q)


# ---------------------------------------------------------------------------------------------
# re-stream



#: The chunkings a side whose parser is its family's built-in replays by default: the built-in
#: parsers' streamed == whole-text property is proven by the test suite (tests/strategies.py), so
#: synthetic chunkings there find nothing that ``recorded`` and ``whole`` do not.
BUILTIN_CHUNKINGS: tuple[str, ...] = ("recorded", "whole")
#: ``split-all``: every two-way split (``split-K`` for each cut K not inside a marker) of a
#: completion of at most :data:`SPLIT_ALL_MAX_CHARS` chars; longer completions get none. A real
#: SGLang release dropped a DeepSeek V3.2 call at exactly one two-way split of 253, which no other
#: default chunking reached (issue 9, item 4).
SPLIT_ALL = "split-all"
SPLIT_ALL_MAX_CHARS = 2000


def side_chunkings(cfg: AuditConfig, builtin: bool) -> tuple[str, ...]:
    """The chunking names one side replays: ``cfg.chunkings`` when given (forced for every side),
    else :data:`BUILTIN_CHUNKINGS` for a side whose parser is the family's built-in (``builtin``)
    and, for any other parser (a plugin, a framework adapter, a side in another interpreter),
    :data:`replay.stream.CHUNKINGS_DEFAULT`, ``token`` with a tokenizer, and :data:`SPLIT_ALL`."""
    if cfg.chunkings is not None:
        return tuple(cfg.chunkings)
    if builtin:
        return BUILTIN_CHUNKINGS
    return CHUNKINGS_DEFAULT + (("token",) if _has_tokenizer(cfg) else ()) + (SPLIT_ALL,)


def _has_tokenizer(cfg: Any) -> bool:
    """Whether ``cfg`` has a plain tokenizer, without building a deferred one
    (:attr:`replay.runspec.AuditConfig.has_tokenizer`; any other config: its ``tokenizer``)."""
    has = getattr(type(cfg), "has_tokenizer", None)
    return bool(cfg.has_tokenizer) if has is not None else cfg.tokenizer is not None


def chunking_plan(cfg: AuditConfig) -> dict[str, Any]:
    """Which sides run which chunkings, for ``run.json`` (``chunkings``) and ``report.md``:
    ``{"forced": bool, "old": {...}, "new": {...}}``, each side with ``parser`` (its spec, or
    ``"built-in"``), ``in_process``, and the chunking names it replays where its parser is the
    family's built-in (``builtin``) and where it is not (``other``; absent for a side that has
    only built-in parsers)."""
    out: dict[str, Any] = {"forced": cfg.chunkings is not None}
    for side in ("old", "new"):
        spec = getattr(cfg, f"{side}_parser")
        remote = getattr(cfg, f"{side}_python") is not None
        entry: dict[str, Any] = {"parser": spec or "built-in", "in_process": not remote}
        if not remote:
            entry["builtin"] = list(side_chunkings(cfg, True))
        if spec is not None or remote:
            entry["other"] = list(side_chunkings(cfg, False))
        out[side] = entry
    return out


def _cut_side(text: str, names: tuple[str, ...], ex: dict[str, Any], cfg: AuditConfig, markers: tuple[str, ...]) -> list[tuple[str, Any]]:
    """``[(chunking, deltas or ChunkingError), ...]`` of one side: ``recorded`` only with steps,
    ``token`` only with a tokenizer, ``split-all`` expanded into its ``split-K`` (for a completion
    of at most :data:`SPLIT_ALL_MAX_CHARS` chars)."""
    cut: list[tuple[str, Any]] = []
    for chunking in names:
        if chunking == "recorded" and ex.get("server_steps") is None:
            continue
        if chunking == "token" and cfg.tokenizer is None:
            continue
        if chunking == SPLIT_ALL:
            if len(text) <= SPLIT_ALL_MAX_CHARS:
                cut.extend((f"split-{k}", deltas) for k, deltas in two_way_splits(text, markers))
            continue
        try:
            deltas: Any = split(text, chunking, markers=markers, steps=ex.get("server_steps"), tokenizer=cfg.tokenizer)
        except ChunkingError as exc:
            deltas = exc
        cut.append((chunking, deltas))
    return cut


@dataclass
class _Sides:
    """Parser classes resolved once per family: reference, old, new (an out-of-process side's
    parser is a :class:`replay.sides.RemoteParser`: its name and markers, as its worker has it)."""

    reference: type
    old: Any
    new: Any
    family_builtin: Any = None  # the family's built-in parser class (get_parser(family))

    def builtin(self, side: str) -> bool:
        """True when ``side``'s parser is the family's built-in parser class (in process, no plugin)."""
        return getattr(self, side) is self.family_builtin

    def cut_markers(self, side: str) -> tuple[str, ...]:
        """The markers (strings) that ``side``'s (``"old"``/``"new"``) chunkings are cut at: the
        reference family's, then the side's parser's own (a plugin or framework parser may add
        tokens). The re-stream stage and the report's exemplars (:mod:`replay.report.exemplars`) use it."""
        return tuple(self.reference.markers) + tuple(getattr(getattr(self, side), "markers", ()))


class ParserResolver:
    """Resolve the parser classes of each side for an exchange's model, once per family.

    ``sides``: the run's :class:`replay.sides.Sides` (opened from ``cfg`` when a side has an
    interpreter and none is given). Raises :class:`replay.parsers.UnknownParserError` (a
    ValueError) for a bad spec, at the first exchange that needs it; the pipeline records it on
    that exchange's rows.
    """

    def __init__(self, cfg: AuditConfig, sides: Any = None) -> None:
        self.cfg = cfg
        self.cache: dict[str, _Sides] = {}
        self.plugins: dict[str, type] = {}
        self._families: dict[Any, str | None] = {}  # model name -> family_for_model (family())
        if sides is None and (cfg.old_python or cfg.new_python):
            sides = open_sides(cfg)
        self.remote = sides

    def _side(self, spec: str | None, family: str) -> type:
        """The class for one side: the family's built-in parser, unless ``spec`` names a parser
        for this family. A parser whose ``name`` is a built-in family (a subclass of HermesParser
        keeps ``name = "hermes"``) replaces only that family's parser; one with any other name
        replaces every family's."""
        if spec is None:
            return get_parser(family)
        if is_per_family_spec(spec):  # parser=sglang: the framework's own parser for this family
            return per_family_parser(spec, family)
        if spec not in self.plugins:
            self.plugins[spec] = get_parser(spec)
        cls = self.plugins[spec]
        own = family_of_parser(cls)
        if own is not None and own != family_of_parser(get_parser(family)):
            return get_parser(family)
        return cls

    def family(self, model: str | None) -> str | None:
        """The family for ``model``: ``--parser`` when given, else the model-name table
        (:func:`replay.parsers.family_for_model`, looked up once per distinct model name: a
        capture holds a few names, asked twice per exchange)."""
        if self.cfg.parser:
            return self.cfg.parser
        try:
            return self._families[model]
        except KeyError:
            if len(self._families) >= 4096:  # a capture of many distinct names stays bounded
                self._families.clear()
            got = self._families[model] = family_for_model(model)
            return got
        except TypeError:  # an unhashable model value (never from the tables)
            return family_for_model(model)

    def _for(self, side: str, spec: str | None, family: str) -> Any:
        worker = self.remote.remote(side) if self.remote is not None else None
        if worker is not None:  # the worker applies the same rule to its own classes
            return worker.parser_for(str(getattr(get_parser(family), "name", family)))
        return self._side(spec, family)

    def sides(self, family: str) -> _Sides:
        if family not in self.cache:
            self.cache[family] = _Sides(
                reference=self._side(self.cfg.reference_parser, family),
                old=self._for("old", self.cfg.old_parser, family),
                new=self._for("new", self.cfg.new_parser, family),
                family_builtin=get_parser(family),
            )
        return self.cache[family]


def family_of_parser(cls: type) -> str | None:
    """The built-in family a parser class belongs to, by its ``name`` attribute; None when the
    name is not a built-in family's."""
    try:
        return get_parser(str(getattr(cls, "name", ""))).name
    except ValueError:
        return None


#: Tags a generation prompt ends with when it opens the model's reasoning section.
REASONING_OPENERS = ("<think>", "<seed:think>")


def prompt_opens_reasoning(prompt: str | None) -> bool:
    """True when the logged prompt ends (trailing whitespace aside) with a reasoning start tag:
    the completion then starts inside the reasoning section (Qwen3 / DeepSeek thinking mode)."""
    return bool(prompt) and prompt.rstrip().endswith(REASONING_OPENERS)


@dataclass
class StreamPlan:
    """One exchange on its way through the re-stream stage (:func:`plan_stream`): its inputs,
    the reference rows already made, and each side's chunkings cut with that side's markers.

    ``chunks``: ``{side: [(chunking, deltas or ChunkingError), ...]}`` in ``cfg.chunkings``
    order. ``done``: True when the exchange ends at the reference (no family, an unreadable
    request, a failed reference parse); ``streams``/``calls`` are then its only rows."""

    xid: Any
    text: str
    tools: list[dict[str, Any]] | None = None
    ro: bool = False
    sides: _Sides | None = None
    ref_calls: list[Any] = field(default_factory=list)
    ref_content: str = ""  # the reference whole-text parse's content (content leaks are judged against it)
    ref_keys: list[Any] = field(default_factory=list)  # json_key() of each reference call's arguments (judge_side)
    ref_reasoning: str = ""  # the reference whole-text parse's reasoning
    truncated: bool = False  # the capture ended with finish_reason `length` (replays then report `length`)
    streams: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    chunks: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)
    names: dict[str, tuple[str, ...]] = field(default_factory=dict)  # {side: chunking names it replays (side_chunkings)}
    ref_parse: Any = None  # the reference whole-text ParseResult (reused by a side with the reference's parser)
    done: bool = False


@dataclass
class SideReplay:
    """What one side made of one exchange: ``parse`` (a ParseResult, or the error text) and, per
    entry of the plan's chunks, an :class:`replay.stream.Assembled`, the error text, or None for
    a chunking that could not be cut."""

    parse: Any
    streams: list[Any]


def plan_stream(ex: dict[str, Any], cfg: AuditConfig, resolver: ParserResolver) -> StreamPlan:
    """Resolve the family and parsers of one exchange, run the reference whole-text parse (its
    rows), and cut each side's chunkings. Never raises (see :func:`stream_exchange`)."""
    text = ex.get("server_output_text")
    xid = ex["exchange_id"]
    plan = StreamPlan(xid=xid, text=text or "")
    if text is None:
        plan.done = True
        return plan
    family = resolver.family(ex.get("model"))
    if family is None:
        plan.streams.append(
            {
                "exchange_id": xid,
                "side": "reference",
                "parser": None,
                "chunking": "parse",
                "error": f"no tool parser family for model {ex.get('model')!r}: pass --parser",
            }
        )
        plan.done = True
        return plan
    try:
        plan.tools = exchange_tools(ex)  # from tools_json: the request is not decoded
        sides = plan.sides = resolver.sides(family)
    except Exception as exc:
        plan.streams.append(
            {"exchange_id": xid, "side": "reference", "parser": family, "chunking": "parse", "error": f"{type(exc).__name__}: {exc}"}
        )
        plan.done = True
        return plan
    ro = plan.ro = prompt_opens_reasoning(ex.get("server_prompt"))
    plan.truncated = ex.get("served_finish_reason") == "length"
    try:
        with deadline(cfg.replay_timeout):
            whole = check_parse_result(new_parser(sides.reference, plan.tools, reasoning_open=ro).parse(text))
    except Exception as exc:
        plan.streams.append(
            {"exchange_id": xid, "side": "reference", "parser": sides.reference.name, "chunking": "parse", "error": f"{type(exc).__name__}: {exc}"}
        )
        plan.done = True
        return plan
    plan.ref_reasoning = whole.reasoning or ""
    reference_rows(plan, whole, sides.reference.name, sides.reference.markers)
    plan.ref_parse = whole
    for side in ("old", "new"):
        cls = getattr(sides, side)
        names = side_chunkings(cfg, sides.builtin(side))
        if side == "new" and cls is sides.old and names == plan.names.get("old"):
            plan.chunks["new"] = plan.chunks["old"]
            plan.names["new"] = names
            continue
        plan.names[side] = names
        plan.chunks[side] = _cut_side(text, names, ex, cfg, sides.cut_markers(side))
    return plan


def replay_in_process(plan: StreamPlan, cls: type, chunks: list[tuple[str, Any]], limit: float) -> SideReplay:
    """Run parser class ``cls`` on a planned exchange in this process: its whole-text parse and a
    streamed replay per chunking, each under ``limit`` seconds. Parser exceptions become the
    entries' error texts (``Type: message``). Once a streamed replay runs out of time
    (:class:`ReplayTimeout`), the side's remaining chunkings of this exchange are not run: they get
    the same error, so a parser that hangs costs about one ``limit`` per exchange, not one per
    chunking (docs/sides.md: a slow replay is stopped and the audit goes on). A timeout of the
    whole-text parse does not stop the streamed replays (``feed`` is other code)."""
    if plan.ref_parse is not None and plan.sides is not None and cls is plan.sides.reference:
        parse: Any = plan.ref_parse  # the same parser on the same text and tools: parsed once
    else:
        try:
            with deadline(limit):
                parse = check_parse_result(new_parser(cls, plan.tools, reasoning_open=plan.ro).parse(plan.text))
        except Exception as exc:
            parse = f"{type(exc).__name__}: {exc}"
    streams: list[Any] = []
    stuck: str | None = None  # the error of a replay that ran out of time: the rest are not run
    for _, deltas in chunks:
        if isinstance(deltas, ChunkingError):
            streams.append(None)
            continue
        if stuck is not None:
            streams.append(stuck)
            continue
        try:
            with deadline(limit):
                streams.append(replay_stream(cls, plan.tools, deltas, reasoning_open=plan.ro, finish_reason="length" if plan.truncated else None))
        except ReplayTimeout as exc:
            stuck = f"{type(exc).__name__}: {exc}"
            streams.append(stuck)
        except Exception as exc:
            streams.append(f"{type(exc).__name__}: {exc}")
    return SideReplay(parse, streams)


def replay_item(plan: StreamPlan, parser: RemoteParser, chunks: list[tuple[str, Any]]) -> dict[str, Any]:
    """The ``replay`` request item for an out-of-process side (:mod:`replay.worker`): the text,
    tools, and each chunking as the lengths (chars) of its deltas."""
    return {
        "k": plan.xid,
        "family": parser.family,
        "text": plan.text,
        "tools": plan.tools,
        "reasoning_open": plan.ro,
        "chunkings": [[len(d) for d in deltas] for _, deltas in chunks if not isinstance(deltas, ChunkingError)],
    }


def replay_from_worker(answer: Any, chunks: list[tuple[str, Any]], finish_reason: str | None = None) -> SideReplay:
    """A worker's answer to one ``replay`` item (or the :class:`WorkerError` of a crash or hang
    on it) -> the same :class:`SideReplay` an in-process replay gives: the per-step events are
    joined with :func:`replay.stream.assemble_openai`. ``finish_reason``: the server's (``length``
    for a truncated capture), else each stream's own ``finish_reason`` from the worker (what the
    side's ``finish()`` reported, as :func:`replay.stream.replay_stream` takes it in process)."""
    n_cut = sum(1 for _, d in chunks if not isinstance(d, ChunkingError))
    if isinstance(answer, WorkerError) or not isinstance(answer, dict) or "error" in answer:
        msg = str(answer) if not isinstance(answer, dict) else str(answer["error"])
        got: list[Any] = [msg] * n_cut
        parse: Any = msg
    else:
        p = answer.get("parse") or {}
        if "error" in p:
            parse = p["error"]
        else:
            parse = ParseResult(
                content=p.get("content", ""), calls=tuple(ToolCall(n, a) for n, a in p.get("calls", ())), reasoning=p.get("reasoning", "")
            )
        got = []
        for s in answer.get("streams") or ():
            if "error" in s:
                got.append(s["error"])
                continue
            events = [
                StreamDelta(content=c, calls=[CallDelta(x[0], x[1], x[2], *x[3:4]) for x in calls], reasoning=r)
                for _, c, r, calls in s.get("events", ())
            ]
            own = s.get("finish_reason")
            got.append(assemble_openai(events, finish_reason=finish_reason or (own if isinstance(own, str) and own else None)))
        if len(got) != n_cut:
            msg = f"WorkerError: {len(got)} chunkings answered, {n_cut} sent"
            got, parse = [msg] * n_cut, msg
    it = iter(got)
    return SideReplay(parse, [None if isinstance(d, ChunkingError) else next(it) for _, d in chunks])


def finish_stream(
    plan: StreamPlan, cfg: AuditConfig, remote: dict[str, SideReplay] | None = None, copies: list[tuple[Any, ...]] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``streams`` and ``calls`` rows of a planned exchange: the in-process sides are replayed
    here, the out-of-process ones come in ``remote`` (``{side: SideReplay}``).

    ``copies``: when a list, the rows of a side that are the old side's renamed (the same replay
    of the same chunks) are not made; ``(side, s0, s1, c0, c1)`` is appended to it instead: that
    side's streams rows are rows ``s0:s1`` of the returned streams list with ``side`` set, and
    belong right after them, at ``s1`` (``c0:c1``: the same for calls).
    :func:`with_copies` makes the full table of such rows (the re-stream stage builds the copies in
    Arrow rather than as dicts)."""
    if plan.done:
        return plan.streams, plan.calls
    assert plan.sides is not None
    done: dict[int, SideReplay] = {}
    judged: tuple[Any, ...] | None = None  # (replay, chunks, first streams row, first calls row) of the old side
    for side in ("old", "new"):
        cls = getattr(plan.sides, side)
        chunks = plan.chunks[side]
        if remote is not None and side in remote:
            rep = remote[side]
        elif id(cls) in done:  # same parser on both sides: the replay is identical by construction
            rep = done[id(cls)]
        else:
            rep = done[id(cls)] = replay_in_process(plan, cls, chunks, cfg.replay_timeout)
        if judged is not None and judged[0] is rep and judged[1] is chunks:
            # the same replay of the same chunks: the new side's rows are the old side's, renamed
            s0, c0 = judged[2], judged[3]
            if copies is not None:
                ns, nc = len(plan.streams), len(plan.calls)
                copies.append((side, s0, ns, c0, nc))
                continue
            plan.streams.extend([{**r, "side": side} for r in plan.streams[s0:]])
            plan.calls.extend([{**r, "side": side} for r in plan.calls[c0:]])
            continue
        judged = (rep, chunks, len(plan.streams), len(plan.calls))
        judge_side(plan, side, getattr(cls, "name", getattr(cls, "__name__", "?")), chunks, rep)
    return plan.streams, plan.calls


def stream_exchange(
    ex: dict[str, Any], cfg: AuditConfig, resolver: ParserResolver
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``streams`` and ``calls`` rows of one exchange with a raw completion, every side in
    process (out-of-process sides go through :func:`run_stream`'s batches).

    Returns ``([], [])`` when the exchange has no ``server_output_text``. Never raises: a parser
    exception, a chunking that cannot be built (``recorded`` steps that do not join to the
    completion) or a family that cannot be chosen is recorded as the row's ``error``.
    """
    return finish_stream(plan_stream(ex, cfg, resolver), cfg)


# ---------------------------------------------------------------------------------------------
# stage drivers: batch functions, and the loop that moves batches


def _batches(rows: Any, n: int, chars: int = BATCH_CHARS) -> Any:
    """Lists of at most ``n`` exchanges whose raw completions hold at most about ``chars`` chars
    (a list holds one exchange at least), so a batch of huge completions stays bounded."""
    chunk: list[dict[str, Any]] = []
    size = 0
    for ex in rows:
        chunk.append(ex)
        size += len(ex.get("server_output_text") or "")
        if len(chunk) >= n or size >= chars:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def with_copies(table: pa.Table, copies: list[tuple[str, int, int, int]]) -> pa.Table:
    """``table`` (rows with a ``side`` column) with copies of some of its rows put in: each entry
    of ``copies`` is ``(side, at, r0, r1)``: rows ``r0:r1`` of ``table``, ``side`` set to
    ``side``, inserted before row ``at`` (entries in order of ``at``; equal ``at`` in list order).
    The same table :func:`rows_table` makes of the rows with the copies as dicts, built by one
    Arrow ``take`` instead (:func:`finish_stream` ``copies``)."""
    if not copies:
        return table
    take: list[int] = []
    sides = table.column("side").to_pylist()
    out_sides: list[str] = []
    pos = 0
    for side, at, r0, r1 in copies:
        take.extend(range(pos, at))
        out_sides.extend(sides[pos:at])
        take.extend(range(r0, r1))
        out_sides.extend([side] * (r1 - r0))
        pos = at
    take.extend(range(pos, table.num_rows))
    out_sides.extend(sides[pos:])
    out = table.take(pa.array(take, pa.int64()))
    i = out.schema.get_field_index("side")
    return out.set_column(i, out.schema.field(i), pa.array(out_sides, out.schema.field(i).type))


#: ``id(schema)`` -> ``(schema, its struct type)`` for :func:`_from_rows` (the tables' few schemas).
_ROW_TYPES: dict[int, tuple[pa.Schema, pa.DataType]] = {}


def _from_rows(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema=schema)``, the same table (values, types, nullability;
    keys a row lacks are null, keys the schema lacks ignored; the same exceptions), converted by
    Arrow in one pass as one struct array of ``schema``'s fields: ``from_pylist`` builds each
    column from a Python list of the rows' values, several times the cost."""
    got = _ROW_TYPES.get(id(schema))
    if got is None or got[0] is not schema:
        got = _ROW_TYPES[id(schema)] = (schema, pa.struct(list(schema)))
    table = pa.Table.from_struct_array(pa.array(rows, type=got[1]))
    return table.replace_schema_metadata(schema.metadata) if schema.metadata else table


def rows_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows (dicts) -> an Arrow table of ``schema`` (:func:`_from_rows`). A string UTF-8 cannot
    hold (a lone surrogate a parser decoded from a ``"\\ud800"`` escape) is written escaped
    (:func:`_utf8_safe`) rather than lose the batch or stop the run."""
    try:
        return _from_rows(rows, schema)
    except (UnicodeEncodeError, pa.ArrowException):
        return _from_rows([_utf8_safe(r) for r in rows], schema)


class _StageContext:
    """What a stage builds once per process from its config: the sides (serializers in process,
    a worker per out-of-process side) and the parser resolver."""

    def __init__(self, cfg: AuditConfig) -> None:
        self.cfg = cfg
        self.sides = open_sides(cfg)
        self.resolver = ParserResolver(cfg, self.sides)


def stage_context(spec: Any) -> _StageContext:
    """The :class:`_StageContext` of ``spec`` (a :class:`replay.runspec.RunSpec`, or an
    :class:`AuditConfig`), built at the first call in this process and kept on the config."""
    from replay.runspec import config_for

    cfg = config_for(spec)
    ctx = getattr(cfg, "_stage_ctx", None)
    if ctx is None or ctx.sides is not getattr(cfg, "_sides", None):  # the sides were closed since
        ctx = _StageContext(cfg)
        cfg._stage_ctx = ctx
    return ctx


#: Columns of ``exchanges`` each stage reads.
RENDER_COLUMNS = ["exchange_id", "route", "model", "request_json", "tools_json", "server_prompt", "server_prompt_token_ids"]
#: The stream stage reads ``tools_json``, not ``request_json`` (:func:`read_batch` adds
#: ``request_json`` for a batch where ``tools_json`` is missing or null: :func:`exchange_tools`).
STREAM_COLUMNS = [
    "exchange_id", "route", "model", "tools_json", "server_prompt", "server_output_text", "server_steps", "served_finish_reason",
    "served_content",
]


def render_batch(batch: pa.RecordBatch, spec: Any) -> dict[str, pa.Table]:
    """The render stage on one record batch of ``exchanges`` (columns :data:`RENDER_COLUMNS`):
    ``{"renders": table}`` (schema :data:`replay.tables.RENDERS`), rows in the batch's order.

    ``spec``: a :class:`replay.runspec.RunSpec` (its renderers, tokenizer and serializers are
    built once per process) or an :class:`AuditConfig`. Out-of-process sides (:mod:`replay.sides`)
    serialize :data:`replay.sides.BATCH` exchanges per request. A capture without its request
    (``request_json`` ``"{}"``) has no rows. Never raises for the data: a side's failure is its
    row's ``error`` (:func:`render_exchange`).
    """
    with deadlines_installed():
        return _render_batch(batch, stage_context(spec))


def exchange_rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The rows of a record batch of ``exchanges`` as dicts, with ``request_json`` as a view of
    Arrow's UTF-8 buffer (:func:`_bodies`) under ``_body`` instead of a Python str (``request_json`` is None then,
    but ``"{}"`` for a capture without its request, which the stages skip): no str of the 10-60
    KB body is built, and orjson reads bytes without the str's UTF-8 encoding (less CPU per
    request). :func:`decode_request` decodes one row's body when the stage reaches it (decoding
    the whole batch first would keep 512 decoded requests alive at once: more memory, and
    Python's garbage collector walking them). A batch without ``request_json`` is ``to_pylist()``."""
    names = batch.schema.names
    if "request_json" not in names and "tools_json" not in names:
        return batch.to_pylist()
    rows = batch.select([n for n in names if n not in ("request_json", "tools_json")]).to_pylist()
    if "tools_json" in names:
        for ex, text in zip(rows, _shared_texts(batch.column(names.index("tools_json")))):
            ex["tools_json"] = text
    if "request_json" in names:
        for ex, body in zip(rows, _bodies(batch.column(names.index("request_json")))):
            if body == b"{}":
                ex["request_json"] = "{}"
            else:
                ex["request_json"], ex["_body"] = None, body
    return rows


def _shared_texts(column: pa.Array) -> list[str | None]:
    """The values of a string column with each distinct text one shared ``str`` object (its hash
    computed once): a dictionary array's dictionary values, else the column dictionary-encoded."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    values = column.dictionary.to_pylist()
    return [None if i is None else values[i] for i in column.indices.to_pylist()]


#: Tools of the tool lists seen by this process (:func:`exchange_tools`), by ``(route,
#: tools_json)``: each distinct list decoded and put in OpenAI form once. Bounded: emptied when full.
_TOOLS_SEEN: dict[tuple[Any, str], Any] = {}
_TOOLS_SEEN_MAX = 1024


def exchange_tools(ex: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The OpenAI-form tools (:func:`replay.prepare.base.openai_tools`) of an exchanges row (of
    :func:`exchange_rows`, or a plain dict): from its ``tools_json`` (the request's ``tools`` text)
    when known, each distinct list decoded once per process and the same list object returned
    for every exchange that sends it (read-only: never modified by the stages); else from the
    decoded request (``request_json``). Raises for an unreadable request or tools text."""
    text = ex.get("tools_json")
    if text is None:
        decode_request(ex)
        request = ex.pop("_request") if "_request" in ex else exactjson.loads(ex["request_json"])
        return openai_tools(ex.get("route"), request.get("tools"))
    key = (ex.get("route"), text)
    tools = _TOOLS_SEEN.get(key, _TOOLS_SEEN)
    if tools is _TOOLS_SEEN:
        tools = openai_tools(ex.get("route"), exactjson.loads(text))
        if len(_TOOLS_SEEN) >= _TOOLS_SEEN_MAX:
            _TOOLS_SEEN.clear()
        _TOOLS_SEEN[key] = tools
    return tools


def _bodies(column: pa.Array) -> list[Any]:
    """The values of a string column as read-only ``memoryview``s of Arrow's UTF-8 data buffer
    (no copy of the 10-60 KB bodies; each view keeps the buffer alive), or as ``bytes`` (None for
    a null) when the column has nulls or is not a plain string array."""
    if column.null_count or column.type != pa.string():
        return column.cast(pa.binary()).to_pylist()
    _, offsets, data = column.buffers()
    n, first = len(column), column.offset
    ends = memoryview(offsets).cast("i")[first : first + n + 1].tolist() if n else []
    view = memoryview(data) if data is not None else memoryview(b"")
    return [view[a:b] for a, b in zip(ends, ends[1:])]


def decode_request(ex: dict[str, Any], *, share_tools: bool = False) -> dict[str, Any]:
    """``ex`` (a row of :func:`exchange_rows`) with its request decoded: ``_request`` =
    ``orjson.loads`` of its body; a body orjson cannot read becomes ``request_json`` text again,
    so the stage decodes it itself and records its own error, as for any row. Returns ``ex``.

    ``share_tools``: the request's ``tools`` is taken from the row's ``tools_json`` when the body
    holds that text as its top-level ``"tools":`` member (:func:`_decode_sharing_tools`): the
    same decoded list object for every exchange that sends the same tools, read-only (about half
    the bytes of an agent's request are its tools: they are decoded once per distinct list).
    ``ex["_tools_key"]`` is then that text (:func:`replay.render.exchange.render_rows` keys its
    tool-list caches by it). The decoded request is equal either way."""
    body = ex.pop("_body", None)
    if body is not None:
        try:
            got = _decode_sharing_tools(body, ex.get("tools_json")) if share_tools else None
            if got is not None:
                ex["_request"], ex["_tools_key"] = got, ex["tools_json"]
            else:
                ex["_request"] = exactjson.loads(body)
        except orjson.JSONDecodeError:
            ex["request_json"] = bytes(body).decode("utf-8")
    return ex


#: ``tools_json`` text -> ``(b'"tools":' + its UTF-8, its decoded value)``, or None when the text
#: does not decode (:func:`_decode_sharing_tools`). Bounded: emptied when full.
_SHARED_TOOLS: dict[str, tuple[bytes, Any] | None] = {}
_SHARED_TOOLS_MAX = 1024
#: Tool lists shorter than this (chars) are decoded with their request (nothing to gain).
_SHARE_MIN_CHARS = 256


def _decode_sharing_tools(body: Any, text: str | None) -> dict[str, Any] | None:
    """The request in ``body`` (bytes or a memoryview of orjson's compact JSON) decoded with its
    top-level ``tools`` replaced by the shared decoded value of ``text`` (the row's
    ``tools_json``), or None when that cannot be shown equal to ``exactjson.loads(body)`` (the caller
    then decodes the whole body).

    The first ``"tools":`` + ``text`` in the body is replaced by a placeholder string
    (:data:`_TOOLS_PLACEHOLDER`, which the body must not hold) and the rest decoded: an unescaped
    ``"tools":`` is a member name (a quote inside a string is escaped), so the replaced text is a
    whole JSON value and the body is valid exactly when the rest is. The result is used only when
    its top-level ``tools`` is then the placeholder (the occurrence replaced is the member orjson
    keeps: a nested member of the same text, or a duplicate key after it, leaves another value
    there); ``tools`` is then set to the shared value, the same a decode of the whole body gives
    there. (``text`` is the row's ``tools_json``, orjson's text of the value the body's ``tools``
    decodes to, as ingest writes it: a long text, never the placeholder's.) Raises ``orjson.JSONDecodeError`` only as ``orjson.loads`` would
    on the rest."""
    if text is None or len(text) < _SHARE_MIN_CHARS:
        return None
    try:
        entry = _SHARED_TOOLS[text]
    except KeyError:
        try:
            entry = (b'"tools":' + text.encode("utf-8"), exactjson.loads(text))
        except (orjson.JSONDecodeError, UnicodeEncodeError):
            entry = None
        if len(_SHARED_TOOLS) >= _SHARED_TOOLS_MAX:
            _SHARED_TOOLS.clear()
        _SHARED_TOOLS[text] = entry
    if entry is None:
        return None
    pattern, tools = entry
    raw = body if type(body) is bytes else bytes(body)
    # the first occurrence of the whole pattern: found by its head (a long needle makes
    # bytes.find preprocess all of it, as slow as decoding), then compared in place
    head = pattern[:64]
    i = raw.find(head)
    while i >= 0 and not raw.startswith(pattern, i):
        i = raw.find(head, i + 1)
    if i < 0:
        return None
    if raw.find(_TOOLS_PLACEHOLDER) >= 0:  # the body holds the placeholder itself: it would not tell
        return None
    j = i + 8  # just after '"tools":'
    try:
        request = exactjson.loads(b"".join((raw[:j], _TOOLS_PLACEHOLDER, raw[i + len(pattern):])))
    except orjson.JSONDecodeError:
        return None
    if type(request) is not dict or request.get("tools") != _PLACEHOLDER_VALUE:
        return None
    request["tools"] = tools
    return request


#: The JSON text :func:`_decode_sharing_tools` puts where the tools were, and its value: a string
#: a body that does not hold these bytes cannot decode to anywhere else.
_TOOLS_PLACEHOLDER = b'"\\u0000replay:shared-tools"'
_PLACEHOLDER_VALUE = exactjson.loads(_TOOLS_PLACEHOLDER)


def shares_tools(cfg: AuditConfig) -> bool:
    """True when the render stage may hand every exchange that sends the same tools one shared,
    read-only decoded list (:func:`decode_request` ``share_tools``): every side's tool serializer
    and request preparer is a built-in (:data:`replay.tools.SERIALIZERS`,
    :data:`replay.prepare.PREPARERS`; none modifies what it is given). A plugin might modify the
    declarations it gets, which must then stay the exchange's own."""
    from replay.prepare import PREPARERS
    from replay.tools import SERIALIZERS

    return all(spec in SERIALIZERS for spec in cfg.serializer_specs().values()) and all(
        getattr(cfg, f"{side}_preparer", None) in (None, *PREPARERS) for side in SIDES
    )


def _render_batch(batch: pa.RecordBatch, ctx: _StageContext) -> dict[str, pa.Table]:
    cfg = ctx.cfg
    serializers = ctx.sides.serializers
    remote = {side: w for side in SIDES if (w := ctx.sides.remote(side)) is not None}
    rows: list[dict[str, Any]] = []
    share = shares_tools(cfg)
    # in process, the requests are read as bytes and decoded one at a time (exchange_rows); the
    # out-of-process sides' path (remote_renders) sends the request text to the workers
    for chunk in _batches(exchange_rows(batch) if not remote else batch.to_pylist(), BATCH if remote else len(batch) or 1, chars=1 << 62):
        pre = remote_renders(chunk, cfg, remote) if remote else None
        http_tokenize.prefetch(chunk, cfg, serializers, pre, lambda ex: decode_request(ex, share_tools=share))  # server sides: one batch of requests
        for i, ex in enumerate(chunk):
            if ex["request_json"] != "{}":  # a capture without its request (capture_lacks) has nothing to render
                rows.extend(render_exchange(decode_request(ex, share_tools=share), cfg, serializers, pre[i] if pre is not None else None))
                ex.pop("_request", None)  # decoded requests are not kept past their exchange
    return {"renders": rows_table(rows, tables.RENDERS)}


def remote_renders(chunk: list[dict[str, Any]], cfg: AuditConfig, remote: dict[str, Any], *, prompts: bool = False) -> list[dict[str, Any]]:
    """What the out-of-process sides (``remote``: ``{side: replay.sides.WorkerSide}``) give for a
    list of exchanges rows, one request line per side, the workers working at once: per exchange,
    ``{side: serialized tools | None | replay.sides.RemoteRender | WorkerError}`` (the ``pre`` of
    :func:`replay.render.exchange.render_rows`). A side that renders in its interpreter
    (``--old-render-in python``) answers ``render`` with its whole row; any other serializes its
    preparer's tool declarations (``serialize``). An exchange whose request does not decode is
    left out (render_rows records that for every side); its ``_request`` is set on the others.
    A worker sends each prompt's text back when this run compares token ids (:func:`_ids_plan`)
    or ``prompts`` asks for it (``replay show``)."""
    from replay.render.exchange import prepared_tools
    from replay.sides import RemoteRender

    want = prompts or _ids_plan(cfg)[0] is not None

    pre: list[dict[str, Any]] = [{} for _ in chunk]
    work: dict[str, tuple[list[dict[str, Any]], list[int]]] = {side: ([], []) for side in remote}
    for i, ex in enumerate(chunk):
        if ex["request_json"] == "{}":
            continue
        try:
            request = ex["_request"] = exactjson.loads(ex["request_json"])  # decoded once: render_exchange reads it
            openai_tools(ex.get("route"), request.get("tools"))
        except Exception:  # render_exchange records it for every side
            ex.pop("_request", None)
            continue
        for side, w in remote.items():
            pre[i][side] = None
            if w.spec.renders_remotely:
                work[side][0].append({"k": ex["exchange_id"], "route": ex.get("route"), "model": ex.get("model"), "request": ex["request_json"], "prompt": want})
                work[side][1].append(i)
                continue
            tools = prepared_tools(cfg, side, ex.get("route"), request)  # what the side's preparer hands its serializer
            if tools:
                work[side][0].append({"k": ex["exchange_id"], "tools": tools})
                work[side][1].append(i)
    for side, w in remote.items():
        w.submit("render" if w.spec.renders_remotely else "serialize", work[side][0], [1] * len(work[side][0]))
    for side, w in remote.items():
        for i, answer in zip(work[side][1], w.collect()):
            if isinstance(answer, WorkerError):
                pre[i][side] = answer
            elif "error" in answer:
                pre[i][side] = WorkerError(str(answer["error"]))
            elif w.spec.renders_remotely:
                pre[i][side] = RemoteRender(answer.get("row") or {}, answer.get("prompt"))
            else:
                pre[i][side] = answer.get("tools")
    return pre


def family_fit_rows(chunk: list[dict[str, Any]], plans: list[StreamPlan] | None, cfg: AuditConfig, resolver: ParserResolver) -> list[dict[str, Any]]:
    """The ``family_fit`` rows (:data:`replay.tables.FAMILY_FIT`, :func:`replay.family_fit.fit_row`)
    of a list of exchanges: one per exchange with a raw completion, else with served content.
    ``plans``: their :class:`StreamPlan` when made (their decoded tools are reused), else None."""
    from replay.family_fit import fit_row

    rows = []
    for i, ex in enumerate(chunk):
        text, source = ex.get("server_output_text"), "completion"
        if text is None:
            text, source = ex.get("served_content"), "served_content"
        if not text:
            continue
        plan = plans[i] if plans is not None else None
        if plan is not None and plan.sides is not None:
            tools: Any = plan.tools
        else:
            tools = lambda ex=ex: exchange_tools(ex)  # noqa: E731 - decoded only when candidate parses run
        rows.append(
            fit_row(
                ex["exchange_id"], ex.get("model"), resolver.family(ex.get("model")), text, source, tools,
                reasoning_open=prompt_opens_reasoning(ex.get("server_prompt")), limit=cfg.replay_timeout,
            )
        )
    return rows


def stream_batch(batch: pa.RecordBatch, spec: Any) -> dict[str, pa.Table]:
    """The re-stream stage (with its per-row judging, :func:`judge_side`) on one record batch of
    ``exchanges`` (columns :data:`STREAM_COLUMNS`): ``{"streams": table, "calls": table}``
    (schemas :data:`replay.tables.STREAMS`, :data:`replay.tables.CALLS`), rows in the batch's order.

    ``spec`` as for :func:`render_batch`. Out-of-process sides get :data:`replay.sides.BATCH`
    exchanges (at most about :data:`replay.sides.BATCH_CHARS` chars of completions) per request;
    both workers run while this process replays the in-process sides. Never raises for the data
    (:func:`stream_exchange`).
    """
    with deadlines_installed():
        return _stream_batch(batch, stage_context(spec))


def _stream_batch(batch: pa.RecordBatch, ctx: _StageContext) -> dict[str, pa.Table]:
    cfg = ctx.cfg
    remote = {side: w for side in ("old", "new") if (w := ctx.sides.remote(side)) is not None}
    s_rows: list[dict[str, Any]] = []
    c_rows: list[dict[str, Any]] = []
    f_rows: list[dict[str, Any]] = []
    # the new side's rows that are the old side's renamed: copied in Arrow (with_copies)
    s_copies: list[tuple[str, int, int, int]] = []
    c_copies: list[tuple[str, int, int, int]] = []
    for chunk in _batches(exchange_rows(batch), BATCH if remote else 1):
        plans = [plan_stream(ex, cfg, ctx.resolver) for ex in chunk]
        f_rows.extend(family_fit_rows(chunk, plans, cfg, ctx.resolver))
        answers: list[dict[str, SideReplay]] = [{} for _ in plans]
        if remote:
            live = [i for i, p in enumerate(plans) if not p.done]
            for side, w in remote.items():
                items = [replay_item(plans[i], getattr(plans[i].sides, side), plans[i].chunks[side]) for i in live]
                w.submit("replay", items, [1 + len(it["chunkings"]) for it in items])
            for side, w in remote.items():
                for i, answer in zip(live, w.collect()):
                    answers[i][side] = replay_from_worker(answer, plans[i].chunks[side], "length" if plans[i].truncated else None)
        for plan, got in zip(plans, answers):
            copies: list[tuple[Any, ...]] = []
            s, c = finish_stream(plan, cfg, got, copies)
            ns, nc = len(s_rows), len(c_rows)  # the exchange's positions in the batch's lists
            for side, s0, s1, c0, c1 in copies:  # each copy goes right after the rows it copies
                s_copies.append((side, ns + s1, ns + s0, ns + s1))
                c_copies.append((side, nc + c1, nc + c0, nc + c1))
            s_rows.extend(s)
            c_rows.extend(c)
    return {
        "streams": with_copies(rows_table(s_rows, tables.STREAMS), s_copies),
        "calls": with_copies(rows_table(c_rows, tables.CALLS), c_copies),
        "family_fit": rows_table(f_rows, tables.FAMILY_FIT),
    }


@dataclass(frozen=True)
class Stage:
    """A stage as the driver moves it: its ``name``, the batch ``function``, the ``exchanges``
    ``columns`` it reads, and the ``tables`` it writes (names of :data:`replay.tables.TABLES`)."""

    name: str
    function: Callable[[pa.RecordBatch, Any], dict[str, pa.Table]]
    columns: tuple[str, ...]
    tables: tuple[str, ...]


RENDER = Stage("render", render_batch, tuple(RENDER_COLUMNS), ("renders",))
STREAM = Stage("stream", stream_batch, tuple(STREAM_COLUMNS), ("streams", "calls", "family_fit"))


def parts_dir(run_dir: Path, table: str) -> Path:
    """The folder of ``table``'s part files while its stage runs: ``RUN/.parts/<table>/``."""
    return Path(run_dir) / ".parts" / table


def part_name(key: int) -> str:
    """The file name of batch ``key``'s part (zero-padded, so names sort as keys)."""
    return f"part-{key:06d}.parquet"


def write_atomic(path: Path, table: pa.Table) -> None:
    """Write ``table`` to ``path`` as zstd Parquet under a temporary name in the same folder, then
    ``os.replace`` it into place: a reader sees the whole file or none (an interrupted write
    leaves only a ``.tmp-*`` file, which no reader opens)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def merge_parts(run_dir: Path, table: str, keys: list[int]) -> int:
    """Join ``table``'s part files (in ``keys`` order) into ``RUN/<table>.parquet``, written
    atomically (temporary name, then ``os.replace``); returns its row count. The parts stay
    (:func:`run_stage` removes them once every table of the stage is in place).

    One part is held at a time, read by ``pq.ParquetFile(...).read(use_threads=False)``: the
    dataset reader of ``pq.read_table`` left RSS behind it in the joining process and cost more
    CPU (figures: ``benchmarks/RESULTS.md``).
    Raises ValueError for a part whose schema is not the table's (a foreign or older file)."""
    schema = tables.TABLES[table]
    final = Path(run_dir) / f"{table}.parquet"
    tmp = final.with_name(f".tmp-{os.getpid()}-{final.name}")
    n = 0
    with pq.ParquetWriter(tmp, schema, compression="zstd") as w:
        for key in keys:
            part = pq.ParquetFile(parts_dir(run_dir, table) / part_name(key)).read(use_threads=False)
            if part.schema != schema:
                part = part.cast(schema)
            n += part.num_rows
            if part.num_rows:
                w.write_table(part)
            del part
    os.replace(tmp, final)
    return n


def merge_part(item: tuple[str, str, list[int]], spec: Any) -> int:
    """:func:`merge_parts` as a pool work item (``item`` = ``(run folder, table, keys)``; ``spec``
    unused): a stage's tables are joined by its pool processes, one table each."""
    run_dir, table, keys = item
    return merge_parts(Path(run_dir), table, keys)


def exchange_batches(run_dir: Path, columns: Any, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The run's ``exchanges.parquet`` as record batches of ``columns``, in file order: the
    batches of :func:`batch_refs` (batch ``i`` is part ``i`` of every table a stage writes)."""
    path = Path(run_dir) / "exchanges.parquet"
    for ref in batch_refs(path, batch_rows):
        yield read_batch(path, ref, columns)


@dataclass(frozen=True)
class BatchRef:
    """Where one batch of a stage lies in ``exchanges.parquet``: rows ``start`` to ``start +
    rows`` of row group ``row_group``. What the ``--jobs`` pool sends a process instead of the rows
    (a few bytes; the process reads them itself, :func:`read_batch`)."""

    key: int
    row_group: int
    start: int
    rows: int

    @property
    def num_rows(self) -> int:
        """The batch's exchanges (as ``pa.RecordBatch.num_rows``)."""
        return self.rows


def batch_refs(path: Path, batch_rows: int) -> list[BatchRef]:
    """The batches of a stage over ``exchanges.parquet`` at ``path``, from its footer alone (no
    data read): each row group cut into slices of ``batch_rows`` rows (the last one of a row
    group shorter), keyed 0, 1, ... in file order. A batch never spans two row groups, so a
    process reads one row group for it; ``replay audit`` ingests row groups of at most
    ``batch_rows`` rows (:func:`replay.capture.ingest`), one batch each. Empty row groups have none."""
    meta = pq.ParquetFile(path).metadata
    refs: list[BatchRef] = []
    for rg in range(meta.num_row_groups):
        n = meta.row_group(rg).num_rows
        for start in range(0, n, batch_rows):
            refs.append(BatchRef(len(refs), rg, start, min(batch_rows, n - start)))
    return refs


_OPEN: dict[str, Any] = {}  # {"key": (path, size, mtime_ns), "file": pq.ParquetFile}: the last file read_batch opened


def read_batch(path: Path, ref: BatchRef, columns: Any) -> pa.RecordBatch:
    """The rows of ``ref`` (:func:`batch_refs`) of ``exchanges.parquet`` at ``path``, ``columns``
    only, as one record batch: its row group read and sliced. The open file is kept for the next
    call on the same file (same path, size and mtime), as a pool process reads batch after batch."""
    table = _read_row_group(_open(path), ref.row_group, list(columns))
    if ref.start or ref.rows != table.num_rows:
        table = table.slice(ref.start, ref.rows)
    batches = table.combine_chunks().to_batches()
    if len(batches) == 1:
        return batches[0]
    return pa.RecordBatch.from_pylist([], schema=table.schema) if not batches else pa.RecordBatch.from_struct_array(
        pa.concat_arrays([b.to_struct_array() for b in batches])
    )


def _open(path: Path) -> pq.ParquetFile:
    """``exchanges.parquet`` at ``path`` opened (``tools_json`` read as a dictionary array: each
    tool list's text once), kept for the next call on the same file (same path, size, mtime)."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    if _OPEN.get("key") != key:
        _OPEN.clear()
        pf = pq.ParquetFile(path)
        if "tools_json" in pf.schema_arrow.names:
            pf = pq.ParquetFile(path, read_dictionary=["tools_json"])
        _OPEN.update(key=key, file=pf)
    return _OPEN["file"]


def stage_columns(columns: list[str], names: list[str], tools_nulls: Callable[[], int]) -> list[str]:
    """The ``exchanges`` columns a stage reads for its ``columns`` from a batch whose table has
    the columns ``names``: without ``tools_json`` for a table written before it existed, and with
    ``request_json`` (last) when ``tools_json`` is missing or ``tools_nulls()`` (the batch's count
    of null ``tools_json`` values, asked only when needed) is not 0, so that :func:`exchange_tools`
    decodes those rows' requests. The one rule for a row group of ``exchanges.parquet``
    (:func:`_row_group_columns`) and a batch still in memory (:mod:`replay.overlap`)."""
    if "tools_json" not in columns:
        return columns
    if "tools_json" not in names:
        columns = [c for c in columns if c != "tools_json"]
        return columns + ["request_json"] if "request_json" not in columns else columns
    if "request_json" in columns:
        return columns
    return columns + ["request_json"] if tools_nulls() else columns


def _row_group_columns(pf: pq.ParquetFile, row_group: int, columns: list[str]) -> list[str]:
    """The columns :func:`_read_row_group` reads for ``columns`` in ``row_group`` of ``pf``, in its
    order (:func:`stage_columns`), known before any value is read: whether ``tools_json`` holds a
    null there comes from the row group's statistics (its column chunk is read to count them when
    the file has none)."""

    def nulls() -> int:
        rg = pf.metadata.row_group(row_group)  # leaf columns: a list column is several, so found by path
        leaf = next((rg.column(i) for i in range(rg.num_columns) if rg.column(i).path_in_schema == "tools_json"), None)
        stats = leaf.statistics if leaf is not None else None
        if stats is not None and stats.has_null_count:
            return stats.null_count
        return pf.read_row_group(row_group, columns=["tools_json"]).column(0).null_count

    return stage_columns(columns, pf.schema_arrow.names, nulls)


def read_slices(path: Path, ref: BatchRef, columns: Any, rows: int | None = None) -> Iterator[pa.RecordBatch]:
    """The batch ``ref`` of ``exchanges.parquet`` at ``path`` as consecutive record batches of
    ``rows`` rows (default :data:`SLICE_ROWS`; the last one shorter): the slices
    :data:`SLICE_ROWS` cuts from :func:`read_batch`'s batch, the same columns (:func:`_row_group_columns`)
    and values, but decoded from the row group a slice at a time
    (``ParquetFile.iter_batches``), so a process never holds a whole batch's request bodies."""
    rows = rows or SLICE_ROWS
    pf = _open(path)
    cols = _row_group_columns(pf, ref.row_group, list(columns))
    end = ref.start + ref.rows
    pos = 0
    pending: list[pa.RecordBatch] = []
    have = 0
    for b in pf.iter_batches(batch_size=rows, row_groups=[ref.row_group], columns=cols, use_threads=False):
        lo, hi = pos, pos + b.num_rows
        pos = hi
        if hi <= ref.start:
            continue
        if lo >= end:
            break
        b = b.slice(max(0, ref.start - lo), min(hi, end) - max(lo, ref.start))
        while b.num_rows:
            take = min(rows - have, b.num_rows)
            pending.append(b.slice(0, take))
            have += take
            b = b.slice(take)
            if have == rows:
                yield _joined(pending, cols)
                pending, have = [], 0
    if pending:
        yield _joined(pending, cols)


def _joined(pieces: list[pa.RecordBatch], cols: list[str]) -> pa.RecordBatch:
    """One record batch of ``pieces`` (consecutive, same schema), columns in ``cols`` order."""
    if len(pieces) == 1:
        b = pieces[0]
    else:
        b = pa.Table.from_batches(pieces).combine_chunks().to_batches()[0]
    return b if b.schema.names == cols else b.select(cols)


def run_ref(stage: "Stage", path: Path, ref: BatchRef, spec: Any) -> dict[str, pa.Table]:
    """``stage.function`` over the batch ``ref`` of ``exchanges.parquet`` at ``path``, one
    :func:`read_slices` slice at a time, the tables of the slices joined in order: the tables
    ``stage.function`` makes of :func:`read_batch`'s whole batch. Returns ``{table: pa.Table}``."""
    outs = [stage.function(b, spec) for b in read_slices(path, ref, stage.columns)]
    if not outs:  # a reference past its row group's end: the empty tables, as for an empty batch
        return stage.function(read_batch(path, ref, stage.columns), spec)
    if len(outs) == 1:
        return outs[0]
    return {t: pa.concat_tables([o[t] for o in outs]) for t in stage.tables}


def _read_row_group(pf: pq.ParquetFile, row_group: int, columns: list[str]) -> pa.Table:
    """Row group ``row_group`` of ``pf``, the columns :func:`_row_group_columns` names for
    ``columns`` (without ``tools_json`` for a file written before it existed; with
    ``request_json`` when ``tools_json`` is missing or holds a null there, so that
    :func:`exchange_tools` decodes those rows' requests)."""
    return pf.read_row_group(row_group, columns=_row_group_columns(pf, row_group, columns))


#: Exchanges a stage function gets at a time within a batch (:func:`run_ref`): the Python rows
#: of a slice (request bodies, prompts, completions) are alive together, so slices keep that
#: small whatever ``--batch-rows`` is (a lower peak at no more CPU). :data:`replay.sides.BATCH`
#: exchanges, so an out-of-process side still gets requests of its full size.
SLICE_ROWS = BATCH


def write_parts(run_dir: Path, stage: "Stage", key: int, got: dict[str, pa.Table]) -> dict[str, int]:
    """Write one batch's tables (``got``: ``{table: pa.Table}``, each of ``stage.tables``) as part
    ``key`` of each (:func:`write_atomic`); returns ``{table: rows}``."""
    for table in stage.tables:
        write_atomic(parts_dir(run_dir, table) / part_name(key), got[table])
    return {table: got[table].num_rows for table in stage.tables}


def stage_part(item: tuple["Stage", str, BatchRef], spec: Any) -> dict[str, int]:
    """The pool's unit of a stage (:func:`replay.pool.map_batches`): ``item`` = ``(stage, run
    folder, ref)``; read the batch ``ref`` of the run's ``exchanges.parquet`` a slice at a time,
    run ``stage.function`` on each with ``spec`` (:func:`run_ref`) and write its part files here,
    in the pool process (atomically).
    Returns ``{table: rows}``: only counts cross back to the parent."""
    stage, run_dir, ref = item
    path = Path(run_dir) / "exchanges.parquet"
    return write_parts(Path(run_dir), stage, ref.key, run_ref(stage, path, ref, spec))


def stage_fingerprint(run_dir: Path, stage: Stage, cfg: AuditConfig) -> str:
    """What a stage's part files were made from, as a SHA-256 hex: the stage, the run spec
    (``cfg.spec``, else ``cfg.options``), the batch size and the ``exchanges.parquet`` they were cut
    from (size and mtime). Parts of another fingerprint are never reused."""
    ex = Path(run_dir) / "exchanges.parquet"
    st = ex.stat()
    what = {
        "stage": stage.name,
        "spec": repr(cfg.spec) if cfg.spec is not None else json.dumps(cfg.options, sort_keys=True, default=str),
        "batch_rows": cfg.batch_rows,
        "exchanges": [st.st_size, st.st_mtime_ns],
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def resumable_keys(run_dir: Path, stage: Stage, fingerprint: str) -> set[int]:
    """The batch keys whose parts are all present for ``stage`` made with ``fingerprint`` (the local
    driver and :class:`replay.executors.RayEngine` run only the others; part
    files are written atomically: present means complete). Parts of another fingerprint (or of
    none) are removed and the fingerprint recorded in ``RUN/.parts/<stage>.json``."""
    marker = Path(run_dir) / ".parts" / f"{stage.name}.json"
    try:
        same = json.loads(marker.read_text(encoding="utf-8")).get("fingerprint") == fingerprint
    except (OSError, ValueError):
        same = False
    if same:
        have = [{int(p.name[5:11]) for p in parts_dir(run_dir, t).glob("part-*.parquet")} for t in stage.tables]
        return set.intersection(*have) if have else set()
    for table in stage.tables:
        shutil.rmtree(parts_dir(run_dir, table), ignore_errors=True)
    mark_parts(run_dir, stage, fingerprint)
    return set()


def mark_parts(run_dir: Path, stage: Stage, fingerprint: str) -> None:
    """Record (atomically) that ``stage``'s part files in ``RUN/.parts/`` were made with
    ``fingerprint`` (:func:`stage_fingerprint`), in ``RUN/.parts/<stage>.json``: :func:`run_stage`
    then keeps them and runs only the batches that have none (:func:`resumable_keys`)."""
    marker = Path(run_dir) / ".parts" / f"{stage.name}.json"
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_name(f".tmp-{os.getpid()}-{marker.name}")
    tmp.write_text(json.dumps({"fingerprint": fingerprint}), encoding="utf-8")
    os.replace(tmp, marker)


def failed_batch(stage: Stage, batch: pa.RecordBatch, cfg: AuditConfig, message: str) -> dict[str, pa.Table]:
    """The rows of a batch whose pool process died twice (:mod:`replay.pool`), made in this
    process, so the audit goes on and the batch's exchanges are counted, not lost.

    render: every side's row of each exchange carries ``message`` as its ``error``. re-stream:
    with the family's built-in reference parser (trusted, run here) each exchange gets its
    reference rows and old/new rows whose every chunking carries ``message`` (``replay-error``
    rows); with a ``--reference-parser`` plugin, the reference row carries it."""
    ctx = stage_context(cfg)
    if stage.name == "render":
        rows: list[dict[str, Any]] = []
        for ex in batch.to_pylist():
            if ex["request_json"] != "{}":
                rows.extend(render_exchange(ex, cfg, ctx.sides.serializers, {side: WorkerError(message) for side in SIDES}))
        return {"renders": rows_table(rows, tables.RENDERS)}
    s_rows: list[dict[str, Any]] = []
    c_rows: list[dict[str, Any]] = []
    for ex in batch.to_pylist():
        if ex.get("server_output_text") is None:
            continue
        if cfg.reference_parser is not None:
            s_rows.append({"exchange_id": ex["exchange_id"], "side": "reference", "parser": None, "chunking": "parse", "error": message})
            continue
        with deadlines_installed():
            plan = plan_stream(ex, cfg, ctx.resolver)
        if not plan.done:
            lost = {side: replay_from_worker(WorkerError(message), plan.chunks[side]) for side in ("old", "new")}
        s, c = finish_stream(plan, cfg, lost if not plan.done else None)
        s_rows.extend(s)
        c_rows.extend(c)
    with deadlines_installed():
        f_rows = family_fit_rows(batch.to_pylist(), None, cfg, ctx.resolver)
    return {
        "streams": rows_table(s_rows, tables.STREAMS),
        "calls": rows_table(c_rows, tables.CALLS),
        "family_fit": rows_table(f_rows, tables.FAMILY_FIT),
    }


def run_stage(
    run_dir: Path, stage: Stage, cfg: AuditConfig, progress: Callable[[int], None] | None = None, jobs: int | None = None
) -> dict[str, int]:
    """Run ``stage`` over every exchange of the run: cut ``exchanges.parquet`` into batches of at
    most ``cfg.batch_rows`` rows within its row groups (:func:`batch_refs`, from the footer), call
    ``stage.function(batch, spec)`` on each (in slices, :func:`run_ref`), write each result table as a part file
    (``RUN/.parts/<table>/part-NNNNNN.parquet``, atomically), then join each table's parts in key
    order into ``RUN/<table>.parquet`` (atomically) and remove the parts.

    ``jobs`` (default ``cfg.jobs``): with more than one, and more than one batch, the batches run
    on a pool of that many spawned processes (:func:`replay.pool.map_batches`), which get the
    picklable ``cfg.spec`` and a :class:`BatchRef` per batch: each process reads its batch's row
    group itself and writes its parts (:func:`stage_part`), so only references and row counts
    cross between processes and this one holds no batch (a config built by hand, without a spec,
    runs here); a batch whose process died twice gets :func:`failed_batch`'s rows, made here. In
    this process the function gets ``cfg`` itself (its sides, opened by :func:`validate_specs`,
    are reused). The rows and their order do not depend on ``jobs``. What the pool went through
    (restarts, batches retried and failed, its processes' side-worker restarts) is kept in
    ``cfg.executor_stats[stage.name]`` and ``cfg.pool_workers`` (:func:`replay.audit.executor_meta`
    puts it in ``run.json``).

    Resume: parts left by an interrupted run of the same stage, spec and ``exchanges.parquet``
    (:func:`stage_fingerprint`) are kept and their batches not run again. ``progress`` is called
    with the number of exchanges of each batch done. Returns ``{table: rows}``. Until the stage
    ends, a table's previous file (if any) is left as it was: a query never reads a half-written
    table.
    """
    run_dir = Path(run_dir)
    jobs = cfg.jobs if jobs is None else jobs
    path = run_dir / "exchanges.parquet"
    count_exchanges(run_dir)  # FileNotFoundError for a folder that is not a run
    refs = batch_refs(path, cfg.batch_rows)
    pooled = cfg.spec is not None and min(jobs, len(refs)) > 1
    done = resumable_keys(run_dir, stage, stage_fingerprint(run_dir, stage, cfg))
    keys = [ref.key for ref in refs]
    for ref in refs:
        if ref.key in done and progress:
            progress(ref.rows)
    todo = [ref for ref in refs if ref.key not in done]

    if pooled:
        from replay.pool import PoolStats, map_batches

        def on_failed(key: int, item: Any, message: str) -> dict[str, int]:
            batch = read_batch(path, item[2], stage.columns)  # made here, the rows carrying the error
            return write_parts(run_dir, stage, key, failed_batch(stage, batch, cfg, message))

        stats = PoolStats(workers=cfg.pool_workers)
        cfg.executor_stats[stage.name] = stats  # as_dict() when recorded (replay.audit.executor_meta)
        # the processes read their own batches and write their own parts: only (stage, run, ref)
        # goes out and {table: rows} comes back, so this process holds no batch
        items = ((ref.key, (stage, str(run_dir), ref)) for ref in todo)
        for key, item, _counts in map_batches(stage_part, items, cfg.spec, min(jobs, len(refs)), on_failed, stats):
            if progress:
                progress(item[2].rows)
        # the tables are joined by the pool's processes too, at once (one table each): this one
        # never reads a part; a join whose process died is made here
        joins = ((i, (str(run_dir), table, keys)) for i, table in enumerate(stage.tables))
        counts = {item[1]: n for _, item, n in map_batches(
            merge_part, joins, cfg.spec, min(jobs, len(refs)), lambda k, item, msg: merge_part(item, None), stats)}
    else:
        cfg.executor_stats[stage.name] = {"engine": "local", "jobs": 1}
        from replay.memory import release_above
        from replay.pool import RELEASE_ABOVE

        for ref in todo:
            write_parts(run_dir, stage, ref.key, run_ref(stage, path, ref, cfg))
            # as a pool process does after each batch (a lower peak at the same CPU)
            release_above(RELEASE_ABOVE)
            if progress:
                progress(ref.rows)
    if not pooled:
        counts = {table: merge_parts(run_dir, table, keys) for table in stage.tables}
    remove_parts(run_dir, stage)
    return counts


def remove_parts(run_dir: Path, stage: Stage) -> None:
    """Remove ``stage``'s part files and fingerprint from ``RUN/.parts/`` once its tables are
    joined (by :func:`run_stage` and :class:`replay.executors.RayEngine`), and ``RUN/.parts/``
    itself when nothing else is left in it."""
    for table in stage.tables:
        shutil.rmtree(parts_dir(run_dir, table), ignore_errors=True)
    (Path(run_dir) / ".parts" / f"{stage.name}.json").unlink(missing_ok=True)
    try:
        (Path(run_dir) / ".parts").rmdir()
    except OSError:  # other stages' parts still there (an audit's own state), or never made
        pass


def run_render(run_dir: Path, cfg: AuditConfig, progress: Callable[[int], None] | None = None, jobs: int | None = None) -> int:
    """Write ``renders.parquet`` for every exchange of the run (:func:`run_stage` of
    :func:`render_batch`); returns the number of rows.

    ``progress`` is called with the number of exchanges done since the last call; ``jobs``: see
    :func:`run_stage`. Raises :class:`replay.tools.UnknownSerializerError` / :class:`replay.plugins.PluginError` /
    :class:`replay.sides.SideError` for a bad serializer spec or side, before any row is written.
    """
    return run_stage(run_dir, RENDER, cfg, progress, jobs)["renders"]


def run_stream(run_dir: Path, cfg: AuditConfig, progress: Callable[[int], None] | None = None, jobs: int | None = None) -> tuple[int, int]:
    """Write ``streams.parquet`` and ``calls.parquet`` (:func:`run_stage` of :func:`stream_batch`);
    returns their row counts. ``progress`` and ``jobs`` as for :func:`run_render`."""
    counts = run_stage(run_dir, STREAM, cfg, progress, jobs)
    return counts["streams"], counts["calls"]


def _named(option: str, spec: str, resolve: Any) -> None:
    """``resolve(spec)``; its ValueError is raised again, same class, with ``option`` first in the
    message (so the user sees which of the six spec options is wrong)."""
    try:
        resolve(spec)
    except ValueError as exc:
        try:
            err = type(exc)(f"{option} {spec}: {exc}")
        except Exception:  # noqa: BLE001 - a class whose constructor takes other arguments
            err = ValueError(f"{option} {spec}: {exc}")
        raise err from None


class ReferenceFrameworkError(UsageError):
    """``--reference-parser sglang/NAME`` (``vllm/NAME``, ``trtllm/NAME``) where that framework is
    not importable: the reference side runs in the ``replay`` process, never in a worker. A usage
    error (exit 2) saying how to run it."""


def _reference_parser(spec: str) -> None:
    """Resolve the ``--reference-parser`` spec here (the reference side always runs in this
    process; a framework spec imports its framework now). Raises :class:`ReferenceFrameworkError`
    when the framework is not importable in this interpreter, else as :func:`_named`."""
    from replay.adapters import FrameworkMissingError, is_framework_spec

    try:
        _named("--reference-parser", spec, get_parser)
    except FrameworkMissingError as exc:
        if not is_framework_spec(spec):
            raise
        framework = spec.split("/", 1)[0]
        raise ReferenceFrameworkError(
            f"--reference-parser {spec}: {framework} is not importable in {sys.executable}, and the reference side runs in "
            f"the replay process (never in a worker). Run replay with an interpreter that has {framework} (install replay into "
            f"that venv and run its bin/replay), or keep the built-in reference and audit {spec} as a side in its own venv: "
            f"--new-parser {spec} --new-python VENV/bin/python (likewise --old-parser/--old-python)."
        ) from None


def validate_specs(cfg: AuditConfig) -> None:
    """Resolve every serializer and parser spec once, so a typo fails before any work is done.

    In-process specs are resolved here; an out-of-process side's worker is started and resolves
    its own (:func:`replay.sides.open_sides`; the workers are kept for the run). Raises
    ValueError (UnknownSerializerError, UnknownParserError, PluginError, ChunkingError,
    SideError) naming the option and the spec; ValueError for a negative ``replay_timeout``.
    """
    for side in ("old", "new"):
        if getattr(cfg, f"{side}_pythonpath") and not getattr(cfg, f"{side}_python"):
            raise SideError(f"--{side}-pythonpath needs --{side}-python (the interpreter to run that side in)")
    if cfg.replay_timeout < 0:
        raise ValueError(f"--replay-timeout {cfg.replay_timeout:g}: seconds must be 0 (no limit) or more")
    specs = side_specs(cfg)
    for spec in specs.values():
        if spec.in_process:
            _named(f"--{spec.side}-serializer", spec.serializer, get_serializer)
            if spec.parser is not None and spec.side == "reference":
                _reference_parser(spec.parser)
            elif spec.parser is not None:
                _named(f"--{spec.side}-parser", spec.parser, per_family_parser if is_per_family_spec(spec.parser) else get_parser)
    if cfg.parser is not None:
        _named("--parser", cfg.parser, get_parser)
    from replay.prepare import get_preparer

    for side in SIDES:
        spec = getattr(cfg, f"{side}_preparer", None)
        if spec is not None:
            _named(f"--{side}-preparer", spec, get_preparer)
    if cfg.chunkings is not None and not cfg.chunkings:
        raise ChunkingError("no chunking given")
    for chunking in cfg.chunkings or ():
        if chunking == SPLIT_ALL:
            continue
        if chunking == "token" and getattr(cfg, "deferred", False) and _has_tokenizer(cfg):
            continue  # the tokenizer is checked where it is built (replay.audit.setup_render), not loaded here for this
        try:
            check_chunking(chunking, tokenizer=cfg.tokenizer if chunking == "token" else None)  # only token reads it
        except ChunkingError as exc:
            raise ChunkingError(f"--chunkings {chunking}: {exc}") from None
    open_sides(cfg)
