"""The re-stream stage: a batch of ``exchanges`` rows in, ``{"streams", "calls", "family_fit"}``
tables out.

For an exchange with a raw completion (``server.output_text``), run the reference tool parser's
whole-text parse, then each side's parser as a whole-text parse (chunking ``parse``, the
non-streaming path) and as a streaming parser under every chunking, assemble what the client gets
as the OpenAI SDK does (:func:`replay.stream.assemble_openai`), and compare each call with the
reference; the per-row facts are computed in :mod:`replay.judge`. A side given an interpreter
runs out of process (:mod:`replay.sides`): what its worker returns becomes rows through the same
code as an in-process side's. Parsers raise; this module catches per exchange and records the
error on the row. Nothing here knows of processes or files (:mod:`replay.runner.driver` moves
the batches).
"""

from __future__ import annotations

import pyarrow as pa

from dataclasses import dataclass, field
from replay import tables
from replay.deadline import ReplayTimeout, deadline, deadlines_installed
from replay.judge import judge_side, reference_rows
from replay.parsers.base import CallDelta, ParseResult, StreamDelta, ToolCall
from replay.plugin_check import check_parse_result
from replay.runspec import AuditConfig
from replay.sides import BATCH, RemoteParser, WorkerError
from replay.stages.context import ParserResolver, _Sides, _StageContext, stage_context
from replay.stages.rows import _batches, exchange_rows, exchange_tools, rows_table, with_copies
from replay.stream import CHUNKINGS_DEFAULT, ChunkingError, assemble_openai, new_parser, replay_stream, split, two_way_splits
from typing import Any


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


#: The stream stage reads ``tools_json``, not ``request_json`` (:func:`read_batch` adds
#: ``request_json`` for a batch where ``tools_json`` is missing or null: :func:`exchange_tools`).
STREAM_COLUMNS = [
    "exchange_id", "route", "model", "tools_json", "server_prompt", "server_output_text", "server_steps", "served_finish_reason",
    "served_content",
]


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
