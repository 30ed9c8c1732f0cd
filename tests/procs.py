"""Child processes of the tests that signal a running ``replay`` command (test_run_folder,
test_overlap, test_pool_faults): start one, wait until it reaches a point, signal it, and never
leave it running when an assertion fails.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def wait_for(cond: Callable[[], object], seconds: float, step: float = 0.05) -> bool:
    """Poll ``cond()`` every ``step`` seconds for at most ``seconds`` seconds. Returns True as soon
    as it is truthy, else its value once more at the end (as a bool). Raises what ``cond`` raises."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return bool(cond())


def _default_sigint() -> None:
    """In the child before it runs: SIGINT back to its default. A shell runs a command it puts in
    the background (``cmd &``, without job control) with SIGINT ignored, every child inherits
    that, and a Python started so never installs its KeyboardInterrupt handler: the tests' Ctrl-C
    would be lost, and they would time out, whenever the suite itself runs in the background."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def running(cmd: list[str], **popen: Any) -> Iterator[subprocess.Popen]:
    """``subprocess.Popen(cmd, **popen)`` for the ``with`` block, SIGINT at its default in the
    child (:func:`_default_sigint`); on leaving it (an assertion failed, or the test is done),
    SIGKILL the process if it still runs and reap it. Raises what ``Popen`` raises (``OSError``
    when ``cmd[0]`` cannot run)."""
    popen.setdefault("preexec_fn", _default_sigint)
    proc = subprocess.Popen(cmd, **popen)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def signal_when(proc: subprocess.Popen, ready: Callable[[], object], sig: int, *, never: str, within: float = 60,
                settle: float = 0.0, group: bool = False, timeout: float = 60) -> tuple[Any, Any]:
    """Wait (at most ``within`` seconds) until ``ready()`` is truthy, sleep ``settle`` seconds, send
    ``sig`` to ``proc`` (to its whole process group when ``group``: the process must have been
    started with ``start_new_session=True``, as a terminal's Ctrl-C reaches a group), and wait at
    most ``timeout`` seconds for it to end. Returns ``proc.communicate()``'s ``(stdout, stderr)``
    (None for a stream not piped). Raises ``AssertionError`` with ``never`` when ``ready()`` stays
    false, ``subprocess.TimeoutExpired`` when the process outlives ``timeout``."""
    assert wait_for(ready, within), never
    if settle:
        time.sleep(settle)
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    return proc.communicate(timeout=timeout)
