"""The render stage: a batch of ``exchanges`` rows in, ``{"renders": table}`` out.

Per exchange: serialize the request's tool declarations with each side's tool serializer (old,
new, reference), find the nulls each serializer wrote that the client never sent, render the
prompt with the run's renderer, and record its SHA-256, length in chars and (with a tokenizer)
tokens. When two sides serialize the tools identically the prompt is rendered once: the prompts
are then identical by construction. A side that cannot serialize or render gets its error on its
row; the run goes on. A side given an interpreter runs out of process (:mod:`replay.sides`): its
exchanges go to its worker in batches. The stage knows nothing of processes, pools or part
files: :mod:`replay.runner.driver` moves its batches.
"""

from __future__ import annotations

import hashlib
import pyarrow as pa
import sys

from replay import exactjson, tables
from replay.deadline import deadlines_installed
from replay.render import http_tokenize
from replay.runspec import AuditConfig
from replay.sides import BATCH, WorkerError
from replay.stages.context import _StageContext, stage_context
from replay.stages.rows import SIDES, _batches, decode_request, exchange_rows, openai_tools, rows_table, shares_tools
from typing import Any, Callable


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


#: Columns of ``exchanges`` each stage reads.
RENDER_COLUMNS = ["exchange_id", "route", "model", "request_json", "tools_json", "server_prompt", "server_prompt_token_ids"]


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
