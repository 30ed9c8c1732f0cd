"""A wall-clock limit on one parse or replay, shared by the pipeline and the worker process.

Stdlib only: :mod:`replay.worker` imports it in an interpreter that may hold nothing but the
standard library and the user's package.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator


class ReplayTimeout(Exception):
    """A parse or replay ran past its limit (``AuditConfig.replay_timeout``, a parser that hangs)."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`ReplayTimeout` in the block after ``seconds`` (wall clock), with SIGALRM.

    A parser stuck in a backtracking regex or an endless loop on one record is interrupted and
    that record's row gets the error (``ReplayTimeout: took more than 0.5 s``); the audit goes on.
    A no-op outside the main thread, on platforms without ``setitimer``, or with ``seconds <= 0``.
    Code that blocks SIGALRM or hangs inside C is not interrupted: out of process, the parent
    kills such a worker (:mod:`replay.sides`).
    """
    usable = seconds > 0 and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise ReplayTimeout(f"took more than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
