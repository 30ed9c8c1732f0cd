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


#: The limit (seconds) of the deadline now running under :func:`deadlines_installed`'s handler,
#: or None when none is (an alarm then is a stray one and is ignored).
_current: list[float | None] = [None]
_installed = [0]  # depth of deadlines_installed() blocks in this thread (the main thread)


def _usable() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _raise_current(signum: int, frame: Any) -> None:
    limit = _current[0]
    if limit is not None:
        raise ReplayTimeout(f"took more than {limit:g} s")


@contextmanager
def deadlines_installed() -> Iterator[None]:
    """Install the SIGALRM handler once for a whole stage (a batch of exchanges): each
    :func:`deadline` in the block then only arms and disarms the timer (``setitimer``) instead of
    also setting and restoring the handler, which ``signal.signal`` makes cost about 10 us per
    call (its return value is turned into an enum), twice per parse and replay. The previous
    handler is restored at the end. A no-op where :func:`deadline` is one (not the main thread,
    no ``setitimer``)."""
    if not _usable():
        yield
        return
    previous = signal.signal(signal.SIGALRM, _raise_current) if not _installed[0] else None
    _installed[0] += 1
    try:
        yield
    finally:
        _installed[0] -= 1
        if not _installed[0]:
            signal.signal(signal.SIGALRM, previous)


class deadline:
    """Raise :class:`ReplayTimeout` in the block after ``seconds`` (wall clock), with SIGALRM.

    A parser stuck in a backtracking regex or an endless loop on one record is interrupted and
    that record's row gets the error (``ReplayTimeout: took more than 0.5 s``); the audit goes on.
    A no-op outside the main thread, on platforms without ``setitimer``, or with ``seconds <= 0``.
    Inside :func:`deadlines_installed` only the timer is armed; elsewhere the handler is set and
    restored around the block. Code that blocks SIGALRM or hangs inside C is not interrupted: out
    of process, the parent kills such a worker (:mod:`replay.sides`).

    Used as ``with deadline(seconds):``; a class rather than a generator-based context manager:
    the stream stage enters three per exchange (a parse and two replays), and a generator's
    ``contextlib`` machinery cost about as much as the two ``setitimer`` calls.
    """

    __slots__ = ("seconds", "_mode", "_outer", "_previous")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        seconds = self.seconds
        if seconds <= 0 or not _usable():
            self._mode = 0
            return
        if _installed[0]:
            self._mode = 1
            self._outer = _current[0]
            _current[0] = seconds
            signal.setitimer(signal.ITIMER_REAL, seconds)
            return

        def _raise(signum: int, frame: Any) -> None:
            raise ReplayTimeout(f"took more than {seconds:g} s")

        self._mode = 2
        self._previous = signal.signal(signal.SIGALRM, _raise)
        signal.setitimer(signal.ITIMER_REAL, seconds)

    def __exit__(self, *exc: Any) -> None:
        mode = self._mode
        if mode == 1:
            signal.setitimer(signal.ITIMER_REAL, 0)
            _current[0] = self._outer
        elif mode == 2:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
