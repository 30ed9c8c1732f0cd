"""What an out-of-process side hands back to the audit: the types :mod:`replay.sides` makes from a
worker's answers and the render stage (:mod:`replay.render.exchange`) takes in. Kept apart from
:mod:`replay.sides` (which re-exports them) so the render stage needs no import of the side
machinery, which itself imports the render stage: no import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RemoteRender", "WorkerError"]


class WorkerError(Exception):
    """One exchange a worker could not answer (it crashed or hung on it, or answered with an
    error for the whole item); the message is what goes on that exchange's rows as is."""


@dataclass
class RemoteRender:
    """One side's ``renders`` row as its worker rendered it (operation ``render``), and the prompt
    text when the worker was asked for it (``prompt``: the run compares token ids).

    :meth:`finish` is what :func:`replay.render.exchange.render_rows` does with it."""

    row: dict[str, Any]
    prompt: str | None = None

    def finish(self, xid: str, side: str, id_tok: Any, ids_sha: Any, *, is_reference: bool) -> tuple[dict[str, Any], list[int] | None]:
        """``(row, token ids or None)``: the worker's row with this exchange's id and side, and,
        when the run compares token ids (``id_tok``: the reference encoder's tokenizer), the
        prompt's ids in that vocabulary with their SHA-256 (``ids_sha``) and, as in process, the
        ids' count as ``prompt_tokens`` when the side has no tokenizer of its own or renders with
        the reference's renderer (``is_reference``). A tokenizer that raises (a server's tokenize
        endpoint, :mod:`replay.render.http_tokenize`) makes the row's ``error``; never raises."""
        row = {**self.row, "exchange_id": xid, "side": side}
        if id_tok is None or self.prompt is None or row.get("error"):
            return row, None
        try:
            ids = id_tok.ids(self.prompt)
        except Exception as exc:  # noqa: BLE001 - a tokenizer that fails (a server's tokenize endpoint): the side's row error
            from replay.render.base import RenderError

            row["error"] = str(exc) if isinstance(exc, RenderError) else f"{type(exc).__name__}: {exc}"
            return row, None
        row["prompt_ids_sha256"] = ids_sha(ids)
        if is_reference or row.get("prompt_tokens") is None:
            row["prompt_tokens"] = len(ids)
        return row, ids
