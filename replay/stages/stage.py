"""The stages as the runner moves them: :class:`Stage` (name, batch function, the ``exchanges``
columns it reads, the tables it writes), :data:`RENDER` and :data:`STREAM`, and
:func:`failed_batch`, the rows of a batch whose executor failed (made by the stage's own row code,
so the batch's exchanges are counted, not lost).
"""

from __future__ import annotations

import pyarrow as pa

from dataclasses import dataclass
from replay import tables
from replay.deadline import deadlines_installed
from replay.runspec import AuditConfig
from replay.sides import WorkerError
from replay.stages.context import stage_context
from replay.stages.render import RENDER_COLUMNS, render_batch, render_exchange
from replay.stages.rows import SIDES, rows_table
from replay.stages.stream import STREAM_COLUMNS, family_fit_rows, finish_stream, plan_stream, replay_from_worker, stream_batch
from typing import Any, Callable


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


def failed_batch(stage: Stage, batch: pa.RecordBatch, cfg: AuditConfig, message: str) -> dict[str, pa.Table]:
    """The rows of a batch whose pool process died twice (:mod:`replay.runner.pool`), made in this
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
