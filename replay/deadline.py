"""A wall-clock limit on one parse or replay, shared by the pipeline and the worker process.

Stdlib only: :mod:`replay.worker` imports it in an interpreter that may hold nothing but the
standard library and the user's package.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator


class ReplayTimeout(Exception):
    """A parse or replay ran past its limit (``AuditConfig.replay_timeout``, a parser that hangs)."""


#: The limit (seconds) of the deadline now running under :func:`deadlines_installed`'s handler,
#: or None when none is (an alarm then is a stray one and is ignored).
_current: list[float | None] = [None]
#: When (``time.monotonic()`` seconds) the deadline now running under the handler runs out.
_due: list[float] = [0.0]
#: When the timer is armed to fire (``time.monotonic()`` seconds), None when it is not armed:
#: under :func:`deadlines_installed` a deadline leaves the timer armed when it ends, and the next
#: one reuses it (see :class:`deadline`).
_armed: list[float | None] = [None]
_installed = [0]  # depth of deadlines_installed() blocks in this thread (the main thread)

#: The shortest re-arm (seconds): ``setitimer`` rounds to microseconds, and a value that rounds to
#: 0 would disarm the timer instead.
_MIN_ARM = 1e-4


def _usable() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _raise_current(signum: int, frame: Any) -> None:
    """The SIGALRM handler of :func:`deadlines_installed`: raise :class:`ReplayTimeout` in the
    running deadline when it has run out; re-arm the timer for it when the alarm was armed for an
    earlier deadline (one that ended before its time); ignore an alarm with no deadline running."""
    _armed[0] = None
    limit = _current[0]
    if limit is None:
        return
    left = _due[0] - time.monotonic()
    if left > 0:
        signal.setitimer(signal.ITIMER_REAL, max(left, _MIN_ARM))
        _armed[0] = _due[0]
        return
    raise ReplayTimeout(f"took more than {limit:g} s")


@contextmanager
def deadlines_installed() -> Iterator[None]:
    """Install the SIGALRM handler once for a whole stage (a batch of exchanges): each
    :func:`deadline` in the block then costs two reads of ``time.monotonic()`` and, about once
    per limit's worth of seconds, one ``setitimer``, instead of setting and restoring the handler
    (``signal.signal`` turns its return value into an enum on every call) and arming and
    disarming the timer (two ``setitimer`` calls) around every parse and replay. The timer is disarmed and the previous handler restored
    at the end. A no-op where :func:`deadline` is one (not the main thread, no ``setitimer``)."""
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
            signal.setitimer(signal.ITIMER_REAL, 0)  # a timer left armed by the last deadline
            _armed[0] = None
            signal.signal(signal.SIGALRM, previous)


class deadline:
    """Raise :class:`ReplayTimeout` in the block after ``seconds`` (wall clock), with SIGALRM.

    A parser stuck in a backtracking regex or an endless loop on one record is interrupted and
    that record's row gets the error (``ReplayTimeout: took more than 0.5 s``); the audit goes on.
    A no-op outside the main thread, on platforms without ``setitimer``, or with ``seconds <= 0``.
    Inside :func:`deadlines_installed` the timer is armed only when it is not already armed to
    fire by the block's end, and left armed after it (an alarm that comes after its deadline's
    end is ignored, or re-armed for the deadline then running); elsewhere the handler is set and
    restored, and the timer armed and disarmed, around the block. Code that blocks SIGALRM or hangs inside C is not interrupted: out
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
            # the timer is armed only when it would not fire by this deadline's end (none armed,
            # or armed later); a deadline that ends leaves it armed, and when it fires for an
            # earlier deadline the handler re-arms it for the one running (_raise_current)
            self._mode = 1
            self._outer = (_current[0], _due[0])
            due = time.monotonic() + seconds
            _current[0], _due[0] = seconds, due
            armed = _armed[0]
            if armed is None or armed > due:
                signal.setitimer(signal.ITIMER_REAL, seconds)
                _armed[0] = due
            return

        def _raise(signum: int, frame: Any) -> None:
            raise ReplayTimeout(f"took more than {seconds:g} s")

        self._mode = 2
        self._previous = signal.signal(signal.SIGALRM, _raise)
        signal.setitimer(signal.ITIMER_REAL, seconds)

    def __exit__(self, *exc: Any) -> None:
        mode = self._mode
        if mode == 1:
            _current[0], _due[0] = self._outer  # the timer stays armed (see __enter__)
        elif mode == 2:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
