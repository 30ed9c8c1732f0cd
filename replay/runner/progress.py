"""Progress of a run's stages, on stderr: a rich bar per stage on a terminal, a plain line every
~10 s elsewhere (CI, a log file), nothing with ``--quiet``.

One interface for every stage driver (:data:`replay.audit.StageFn`)::

    with reporter(quiet=False) as stage:
        with stage("ingest", total_bytes) as advance:   # ingest counts bytes read from disk
            advance(n)                                  # n more bytes (or exchanges) done
        with stage("render", n_exchanges) as advance:   # later stages count exchanges
            ...

On a terminal each stage gets a bar with done/total, rate and ETA (rich's ``Progress``). When
stderr is not a terminal a line is written when a stage starts, at most every ``interval`` seconds
while it runs, and when it ends::

    replay: render 4,096/20,000 exchanges (20%), 312 exchanges/s, ETA 51s

The clock is injectable (``clock``), so the line form is tested without sleeping.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, ContextManager, Iterator, Optional, TextIO

#: ``stage(name, total) -> context manager yielding advance(n)``.
StageFn = Callable[[str, Optional[int]], ContextManager[Callable[[int], None]]]

#: Seconds between two plain lines of a running stage.
INTERVAL = 10.0


def unit_of(stage: str) -> str:
    """The unit a stage counts: ``bytes`` for ingest (of the capture files on disk), else ``exchanges``."""
    return "bytes" if stage == "ingest" else "exchanges"


def _bytes(n: float) -> str:
    """``n`` bytes as decimal B/kB/MB/GB, one decimal from kB up (``63.2 MB``)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def _amount(n: float, unit: str) -> str:
    return _bytes(n) if unit == "bytes" else f"{int(n):,}"


def _duration(s: float) -> str:
    """``s`` seconds as ``45s``, ``3m05s`` or ``1h02m``."""
    s = max(0, int(round(s)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def status_line(stage: str, done: int, total: Optional[int], seconds: float, unit: str, finished: bool = False) -> str:
    """One plain progress line: ``replay: STAGE DONE/TOTAL UNIT (P%), RATE UNIT/s, ETA T``.

    ``done``/``total``: counts of ``unit`` (``bytes`` or ``exchanges``; ``total`` None when
    unknown: then no percentage or ETA). ``seconds``: time since the stage started. ``finished``:
    the stage's last line (``done in T`` in place of the ETA). Rate and ETA are left out until
    some time has passed and something is done."""
    label = "" if unit == "bytes" else f" {unit}"
    parts = [f"replay: {stage} {_amount(done, unit)}" + (f"/{_amount(total, unit)}" if total is not None else "") + label]
    if total:
        parts[0] += f" ({min(100, int(100 * done / total))}%)"
    rate = done / seconds if seconds > 0 else 0.0
    if rate > 0:
        parts.append(f"{_bytes(rate)}/s" if unit == "bytes" else f"{rate:,.0f} {unit}/s")
    if finished:
        parts.append(f"done in {_duration(seconds)}")
    elif rate > 0 and total:
        parts.append(f"ETA {_duration(max(0, total - done) / rate)}")
    return ", ".join(parts)


class LineProgress:
    """The non-terminal form: :func:`status_line` to ``out`` when a stage starts, at most every
    ``interval`` seconds of ``clock`` (a ``time.monotonic``-like function) while it advances, and
    when it ends. Use :meth:`stage` as a :data:`StageFn`."""

    def __init__(self, out: TextIO, interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        self.out, self.interval, self.clock = out, interval, clock

    def _write(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    @contextmanager
    def stage(self, name: str, total: Optional[int]) -> Iterator[Callable[[int], None]]:
        """A stage of ``total`` units (None: unknown); yields ``advance(n)``. The end line gives
        ``total`` as done when the stage ends normally (a driver's last partial count is not
        always reported), what was counted when it raised."""
        unit = unit_of(name)
        start = last = self.clock()
        done = 0
        self._write(status_line(name, 0, total, 0.0, unit))

        def advance(n: int) -> None:
            nonlocal done, last
            done += n
            now = self.clock()
            if now - last >= self.interval:
                last = now
                self._write(status_line(name, done, total, now - start, unit))

        try:
            yield advance
        except BaseException:
            self._write(status_line(name, done, total, self.clock() - start, unit) + " (stopped)")
            raise
        self._write(status_line(name, total if total is not None else done, total, self.clock() - start, unit, finished=True))


def _rich_progress(console: Any) -> Any:
    from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.text import Text

    class Done(ProgressColumn):
        """``done/total`` in the stage's unit."""

        def render(self, task: Any) -> Text:
            unit = task.fields.get("unit", "exchanges")
            total = _amount(task.total, unit) if task.total is not None else "?"
            return Text(f"{_amount(task.completed, unit)}/{total}" + ("" if unit == "bytes" else f" {unit}"))

    class Rate(ProgressColumn):
        """Units per second over the stage so far (rich's own speed is over a short window)."""

        def render(self, task: Any) -> Text:
            unit = task.fields.get("unit", "exchanges")
            elapsed = task.finished_time if task.finished else task.elapsed
            if not elapsed or not task.completed:
                return Text("")
            rate = task.completed / elapsed
            return Text(f"{_bytes(rate)}/s" if unit == "bytes" else f"{rate:,.0f}/s")

    return Progress(
        TextColumn("{task.description:<10}"),
        BarColumn(),
        Done(),
        Rate(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


@contextmanager
def reporter(
    quiet: bool = False,
    *,
    terminal: Optional[bool] = None,
    out: Optional[TextIO] = None,
    interval: float = INTERVAL,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[StageFn]:
    """The progress of a run on stderr; yields a :data:`StageFn`.

    ``quiet``: no output at all. ``terminal``: force the bar (True) or the lines (False); None
    asks rich whether stderr is a terminal (``FORCE_COLOR``/``TERM=dumb`` respected). ``out``:
    where the lines go (default ``sys.stderr``); ``interval``/``clock``: see :class:`LineProgress`.
    The bar starts at the first stage, so an option error raised before it prints no bar."""
    if quiet:
        yield lambda name, total: nullcontext(lambda n: None)
        return
    from rich.console import Console

    console = Console(stderr=True, emoji=False)
    if not (console.is_terminal if terminal is None else terminal):
        yield LineProgress(out or sys.stderr, interval, clock).stage
        return
    progress = _rich_progress(console)
    started = []

    @contextmanager
    def stage(name: str, total: Optional[int]) -> Iterator[Callable[[int], None]]:
        if not started:
            progress.start()
            started.append(True)
        task = progress.add_task(name, total=total, unit=unit_of(name))
        yield lambda n: progress.advance(task, n)
        progress.update(task, completed=total if total is not None else progress.tasks[task].completed)

    try:
        yield stage
    finally:
        if started:
            progress.stop()
