"""What a side is, and how an out-of-process side is run.

A *side* (``old``, ``new``, ``reference``) is a tool serializer spec, a tool parser spec, and
optionally an interpreter with extra import paths (the keys of its value, :mod:`replay.side`):

- **in process** (no interpreter given): the specs are resolved here, with
  :func:`replay.tools.get_serializer` and :func:`replay.parsers.get_parser`;
- **out of process** (``--old python=PATH``, ``--new python=PATH``, with ``pythonpath=``): a :class:`WorkerSide` runs ``PATH -m replay.worker`` (protocol in
  :mod:`replay.worker`) with ``PYTHONPATH`` = the side's paths, then the directory holding this
  ``replay`` package. The worker resolves the specs with the same two functions, in its
  interpreter, so a plugin importable only there (the ``main`` checkout of your package, a
  framework venv) is fine.

With ``--old render_in=python`` (``AuditConfig.old_render_in``) the worker also renders the
side's prompts (operation ``render``): the request preparer, serializer, chat template or renderer
and tokenizer of that side are built in the worker's interpreter from the run's own options
(:func:`render_spec`), so a template renders with that environment's transformers and jinja2;
the audit's process adds only the token-id comparison (:class:`RemoteRender`). The default
(``audit``) renders every side here, with only the serializer run in the worker.

Sides are resolved once per audit (:func:`open_sides`): a worker is started and its specs
checked before any work, so a bad interpreter path or a plugin that does not import there fails
with a clear :class:`SideError` first. During the run, a worker that exits (a crash, ``os._exit``,
a segfault in user code) or gives no answer in time is killed and restarted; the exchange it was
on gets the error on its rows and the rest of the batch is sent again. Restarts are counted
(:meth:`Sides.meta`, written to ``run.json`` as ``sides``).
"""

from __future__ import annotations

import os
import platform
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replay.remote import RemoteRender, WorkerError  # noqa: F401  (part of this module's API)
from replay.worker import PROTOCOL, dumps, loads

#: Seconds a worker may take to start and resolve its specs (importing a framework such as vLLM
#: can take tens of seconds).
START_TIMEOUT = 120.0
#: Seconds added to each exchange's limit in the parent (IPC, JSON, the worker's own bookkeeping).
GRACE = 2.0
#: Exchanges per request line sent to a worker, and at most about this many chars of raw
#: completions (their chunkings are cut in the parent and held until the answers come back).
BATCH = 64
BATCH_CHARS = 2_000_000
#: Incidents (crashes, hangs) kept per side for ``run.json``.
MAX_INCIDENTS = 20


class SideError(ValueError):
    """A side that cannot be used: its interpreter does not run, its worker does not start, or its
    serializer/parser spec does not resolve in that interpreter. The message names the option."""


@dataclass(frozen=True)
class SideSpec:
    """One side as configured: ``side`` (``old``/``new``/``reference``), its ``serializer`` spec,
    its ``parser`` spec (None: each family's built-in parser), and ``python`` (an interpreter
    path; None: in process) with ``pythonpath`` (directories put first on the worker's
    ``PYTHONPATH``)."""

    side: str
    serializer: str
    parser: str | None = None
    python: str | None = None
    pythonpath: tuple[str, ...] = ()
    render: str | None = None  # the worker's render options (:func:`render_spec`) as JSON text; None: render in the audit

    @property
    def in_process(self) -> bool:
        return self.python is None

    @property
    def renders_remotely(self) -> bool:
        """The side's worker renders its prompts (``render_in=python``)."""
        return self.python is not None and self.render is not None


def split_pythonpath(value: str | None) -> tuple[str, ...]:
    """A side's ``pythonpath`` (directories joined by ``os.pathsep``, as ``PYTHONPATH``) ->
    absolute paths (relative ones taken from the current directory); ``()`` for None/empty."""
    if not value:
        return ()
    return tuple(str(Path(p).expanduser().resolve()) for p in value.split(os.pathsep) if p.strip())


#: Values of a side's ``render_in`` (:mod:`replay.side`): ``audit`` renders the side in the audit's
#: own interpreter (its serializer still runs in the side's worker), ``python`` in the side's
#: ``python`` interpreter.
RENDER_IN = ("audit", "python")


def render_spec(cfg: Any, side: str) -> dict[str, Any] | None:
    """The ``render`` options of a worker's ``init`` (:mod:`replay.worker`) for ``side`` of
    ``cfg`` when that side renders in its interpreter (``cfg.<side>_render_in == "python"``), else
    None: the run's render options as plain values (``cfg.spec``, a
    :class:`replay.runspec.RunSpec`: template and tokenizer paths made absolute), the side's
    preparer, and whether the side's renderer is the reference's in this process (``as_reference``).

    Raises :class:`SideError` naming the option for ``python`` without an interpreter, an unknown
    value, or a config built by hand (no ``spec``: its renderer objects cannot be sent)."""
    how = getattr(cfg, f"{side}_render_in", None) or "audit"
    if how not in RENDER_IN:
        raise SideError(f"--{side} render_in={how}: expected one of {', '.join(RENDER_IN)}")
    if how == "audit":
        return None
    if getattr(cfg, f"{side}_python", None) is None:
        raise SideError(f"--{side} render_in=python: the {side} side has no interpreter of its own (give --{side} python=INTERPRETER)")
    spec = getattr(cfg, "spec", None)
    if spec is None:
        raise SideError(f"--{side} render_in=python needs a run spec (replay.runspec.RunSpec) to send the render options to the worker")
    from replay.render.exchange import render_plan
    from replay.render.options import split_route

    def path(value: str | None) -> str | None:
        return None if value is None else str(Path(value).expanduser().resolve())

    def routed(value: str) -> str:
        pattern, p = split_route(value)
        return path(p) if pattern is None else f"{pattern}={path(p)}"  # type: ignore[return-value]

    plan = render_plan(cfg)
    return {
        "side": side,
        "chat_templates": [routed(v) for v in ([spec.chat_template] if spec.chat_template else []) + list(spec.chat_template_routes)],
        "tokenizers": [routed(v) for v in ([spec.tokenizer] if spec.tokenizer else []) + list(spec.tokenizer_routes)],
        "renderer": spec.renderer,
        "side_chat_template": path(getattr(spec, f"{side}_chat_template")),
        "side_renderer": getattr(spec, f"{side}_renderer"),
        "date": spec.date,
        "preparer": getattr(spec, f"{side}_preparer"),
        "as_reference": plan.renderers[side] is plan.renderers["reference"],
    }


def side_specs(cfg: Any) -> dict[str, SideSpec]:
    """The three sides of an :class:`replay.runspec.AuditConfig`. The reference side always
    runs (and renders) in process. Raises :class:`SideError` as :func:`render_spec` does."""
    import json

    def render(side: str) -> str | None:
        got = render_spec(cfg, side)
        return None if got is None else json.dumps(got, sort_keys=True)

    return {
        "old": SideSpec("old", cfg.old_serializer, cfg.old_parser, cfg.old_python, tuple(cfg.old_pythonpath), render("old")),
        "new": SideSpec("new", cfg.new_serializer, cfg.new_parser, cfg.new_python, tuple(cfg.new_pythonpath), render("new")),
        "reference": SideSpec("reference", cfg.reference_serializer, cfg.reference_parser),
    }


def _python_version(python: str | os.PathLike) -> tuple[int, int] | None:
    """``(major, minor)`` of the interpreter at ``python`` (``sys.version_info`` printed by it
    within 10 s), or None when it does not run or print that (not a Python)."""
    try:
        got = subprocess.run(
            [str(python), "-c", "import sys; print('%d %d' % sys.version_info[:2])"],
            capture_output=True, text=True, timeout=10, check=False,
        )
        major, minor = got.stdout.split()
        return int(major), int(minor)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def _replay_home() -> str:
    """The directory holding this ``replay`` package (what the worker needs on its path)."""
    return str(Path(__file__).resolve().parent.parent)


@dataclass(frozen=True)
class RemoteParser:
    """A parser class as a worker resolved it for one family: its ``name`` and ``markers`` (the
    parent needs them to label rows and to cut chunkings), and the ``family`` to ask for."""

    name: str
    markers: tuple[str, ...]
    family: str
    side: str


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


@dataclass
class _Pending:
    """A request line sent and not fully answered: its items, the per-item limit and the time
    the worker could start on the next item."""

    op: str
    items: list[dict[str, Any]]
    limits: list[float | None]
    answers: list[Any] = field(default_factory=list)
    since: float = 0.0


class WorkerSide:
    """An out-of-process side: one ``python -m replay.worker`` process, restarted when it dies.

    ``spec``: the side (``spec.python`` set). ``timeout``: ``AuditConfig.replay_timeout``
    (seconds; 0 = none). The worker applies it to each parse and replay as the in-process path
    does; the parent kills a worker that gives no answer to an exchange within ``timeout x
    (operations of the exchange) + GRACE`` seconds. :meth:`start` raises :class:`SideError`.
    """

    def __init__(self, spec: SideSpec, timeout: float) -> None:
        assert spec.python is not None
        self.spec = spec
        self.timeout = timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}
        self.parsers: dict[str, dict[str, Any]] = {}
        self.starts = 0
        self.restarts = 0
        self.incidents: list[dict[str, Any]] = []
        self.dead: str | None = None  # set when a restart failed: every later exchange gets it
        self._lines: queue.Queue[tuple[float, bytes | None]] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=40)
        self._pending: _Pending | None = None
        self._last = 0.0  # when the last answer line arrived (monotonic seconds)

    # --- process ---------------------------------------------------------------------------
    @property
    def option(self) -> str:
        # the earlier spelling's flag: it is part of the errors a worker's rows record (streams.error)
        return f"--{self.spec.side}-python {self.spec.python}"

    def env(self) -> dict[str, str]:
        """The worker's environment: ours, with ``PYTHONPATH`` = the side's paths then replay's
        home (the parent's own ``PYTHONPATH`` is not passed on), and unbuffered, safe-path I/O."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([*self.spec.pythonpath, _replay_home()])
        env["PYTHONSAFEPATH"] = "1"  # 3.11+: do not put the current directory first
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONIOENCODING"] = "utf-8"
        return env

    def start(self) -> None:
        """Start the worker and resolve its specs; raises :class:`SideError` naming the option
        and the cause (the last lines of the worker's stderr when it died)."""
        self.close()
        self._lines = queue.Queue()
        self._stderr = deque(maxlen=40)
        for entry in self.spec.pythonpath:
            if not Path(entry).exists():
                raise SideError(f"--{self.spec.side}-pythonpath: no such directory: {entry}")
        try:
            self.proc = subprocess.Popen(
                [str(self.spec.python), "-m", "replay.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env(),
            )
        except OSError as exc:
            raise SideError(f"{self.option}: cannot run it: {exc}") from None
        self.starts += 1
        proc = self.proc
        threading.Thread(target=self._read_out, args=(proc, self._lines), daemon=True).start()
        threading.Thread(target=self._read_err, args=(proc, self._stderr), daemon=True).start()
        init = {
            "op": "init",
            "protocol": PROTOCOL,
            "serializer": self.spec.serializer,
            "parser": self.spec.parser,
            "timeout": self.timeout,
        }
        if self.spec.render is not None:
            import json

            init["render"] = json.loads(self.spec.render)
        try:
            self._write(init)
            answer = self._answer(time.monotonic() + START_TIMEOUT)
        except WorkerError as exc:
            self.close()
            hint = ""
            if "No module named replay.worker" in str(exc) or "No module named 'replay.worker'" in str(exc):
                hint = f" (a `replay` package without worker.py comes before {_replay_home()} on its path)"
            elif (version := _python_version(self.spec.python)) is None:
                hint = " (it does not run as a Python interpreter)"
            elif version < (3, 10):
                hint = f" (it is Python {version[0]}.{version[1]}; the worker needs Python 3.10 or newer)"
            raise SideError(f"{self.option}: the worker did not start: {exc}{hint}") from None
        if not isinstance(answer, dict) or not answer.get("ok"):
            self.close()
            why = answer.get("error") if isinstance(answer, dict) else answer
            option = f"{self.option} --{self.spec.side}-render-in python" if str(why).startswith("cannot render here") else self.option
            raise SideError(f"{option}: {why}")
        self.parsers = answer.get("parsers") or {}
        self.info = {k: answer.get(k) for k in ("python", "executable", "pid", "replay", "render")}

    @staticmethod
    def _read_out(proc: subprocess.Popen[bytes], lines: queue.Queue[tuple[float, bytes | None]]) -> None:
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                lines.put((time.monotonic(), line))
        except (OSError, ValueError):  # the pipe was closed under us (the worker was replaced)
            pass
        lines.put((time.monotonic(), None))

    @staticmethod
    def _read_err(proc: subprocess.Popen[bytes], tail: deque[str]) -> None:
        assert proc.stderr is not None
        try:
            for line in proc.stderr:
                tail.append(line.decode("utf-8", "replace").rstrip())
        except (OSError, ValueError):
            pass

    def _write(self, msg: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(dumps(msg) + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerError(self._death("the worker exited")) from None

    def _death(self, what: str) -> str:
        """``what`` with the exit status and the last stderr line, once the process is gone."""
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait()
        time.sleep(0.05)  # let the stderr reader catch the last lines
        status = "" if code is None else (f" (killed by {_signal_name(code)})" if code < 0 else f" (exit code {code})")
        tail = [l for l in list(self._stderr) if l.strip()]
        return f"{what}{status}" + (f": {tail[-1]}" if tail else "")

    def _answer(self, until: float | None) -> Any:
        """The next answer line before ``until`` (monotonic seconds; None = no limit).

        Raises :class:`WorkerError` when the worker exits first, or kills it and raises when the
        time is up."""
        wait = None if until is None else max(0.0, until - time.monotonic())
        try:
            at, line = self._lines.get(timeout=wait)
        except queue.Empty:
            self.kill()
            raise WorkerError("the worker gave no answer in time: killed") from None
        if line is None:
            raise WorkerError(self._death("the worker exited"))
        self._last = at
        try:
            return loads(line)
        except ValueError as exc:
            self.kill()
            raise WorkerError(f"the worker wrote a line that is not JSON ({exc}): killed") from None

    def kill(self) -> None:
        """Kill the worker process (no-op when there is none)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        """Ask the worker to exit, then make sure it has."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.write(b'{"op":"exit"}\n')
                proc.stdin.close()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def _ensure(self) -> bool:
        """A live worker, restarting a dead one; False when it cannot be restarted (then
        :attr:`dead` says why)."""
        if self.dead is not None:
            return False
        if self.proc is not None and self.proc.poll() is None:
            return True
        try:
            self.start()
        except SideError as exc:
            self.dead = f"WorkerError: {exc}"
            return False
        self.restarts += 1
        return True

    # --- batches ---------------------------------------------------------------------------
    def item_limit(self, ops: int) -> float | None:
        """Seconds the parent waits for one exchange of ``ops`` timed operations."""
        return None if self.timeout <= 0 else self.timeout * max(1, ops) + GRACE

    def submit(self, op: str, items: list[dict[str, Any]], ops: list[int]) -> None:
        """Send one request line (``op`` over ``items``, each with its number of timed
        operations); :meth:`collect` returns the answers. One request at a time."""
        assert self._pending is None
        self._pending = _Pending(op, items, [self.item_limit(n) for n in ops])
        self._send_rest()

    def _send_rest(self) -> None:
        p = self._pending
        assert p is not None
        rest = p.items[len(p.answers) :]
        if not rest:
            return
        if not self._ensure():
            return
        p.since = time.monotonic()
        try:
            self._write({"op": p.op, "items": rest})
        except WorkerError:
            pass  # seen by collect() as the worker's exit

    def collect(self) -> list[Any]:
        """The answers of the request sent with :meth:`submit`, one per item, in order: the
        worker's answer dict, or a :class:`WorkerError` for an item it crashed or hung on (the
        worker is then restarted and the items after it are sent again)."""
        p = self._pending
        assert p is not None
        while len(p.answers) < len(p.items):
            k = len(p.answers)
            if self.dead is not None:
                p.answers.append(WorkerError(self.dead))
                continue
            limit = p.limits[k]
            try:
                if self.proc is None:
                    raise WorkerError(self._death("the worker exited"))
                answer = self._answer(None if limit is None else p.since + limit)
                p.since = self._last
            except WorkerError as exc:
                msg = str(exc)
                if "no answer in time" in msg and limit is not None:
                    msg = f"the worker gave no answer in {limit:g} s: killed"
                self._incident(p.items[k], msg)
                p.answers.append(WorkerError(f"WorkerError: {msg}"))
                self.kill()
                self._send_rest()
                continue
            if isinstance(answer, dict) and answer.get("k") != p.items[k].get("k"):
                self.kill()
                err = WorkerError(f"WorkerError: answer for item {answer.get('k')!r}, expected {p.items[k].get('k')!r}")
                p.answers.append(err)
                self._send_rest()
                continue
            p.answers.append(answer)
        self._pending = None
        return p.answers

    def _incident(self, item: dict[str, Any], msg: str) -> None:
        if len(self.incidents) < MAX_INCIDENTS:
            self.incidents.append({"exchange_id": item.get("k"), "error": msg})

    def parser_for(self, family: str) -> RemoteParser:
        """The worker's parser for ``family`` (a canonical family name). When the worker's replay
        has no such family, the parser is named after the family, has no markers, and the
        worker answers each of its items with that error (the side's rows carry it)."""
        got = self.parsers.get(family)
        if got is None:
            return RemoteParser(name=family, markers=(), family=family, side=self.spec.side)
        return RemoteParser(name=got["name"], markers=tuple(got["markers"]), family=family, side=self.spec.side)

    def meta(self) -> dict[str, Any]:
        """This side for ``run.json``: interpreter, its Python version, paths, restarts, incidents."""
        return {
            "in_process": False,
            "python": self.spec.python,
            "executable": self.info.get("executable"),
            "python_version": self.info.get("python"),
            "pythonpath": list(self.spec.pythonpath),
            "replay_package": self.info.get("replay"),
            "serializer": self.spec.serializer,
            "parser": self.spec.parser,
            "render_in": "python" if self.spec.renders_remotely else "audit",
            **({"render": self.info.get("render")} if self.spec.renders_remotely else {}),
            "restarts": self.restarts,
            "incidents": list(self.incidents),
            **({"dead": self.dead} if self.dead else {}),
        }


class Sides:
    """The resolved sides of one audit: the in-process serializers, and a :class:`WorkerSide`
    per out-of-process side. Made by :func:`open_sides`; :meth:`close` stops the workers."""

    def __init__(self, specs: dict[str, SideSpec], timeout: float) -> None:
        from replay.tools import get_serializer

        self.specs = specs
        self.workers: dict[str, WorkerSide] = {}
        self.serializers: dict[str, Any] = {}
        try:
            for side, spec in specs.items():
                if spec.in_process:
                    self.serializers[side] = get_serializer(spec.serializer)
                else:
                    w = WorkerSide(spec, timeout)
                    self.workers[side] = w
                    w.start()
        except BaseException:
            self.close()
            raise

    def remote(self, side: str) -> WorkerSide | None:
        """The worker of ``side``, or None when it runs in process."""
        return self.workers.get(side)

    def meta(self) -> dict[str, dict[str, Any]]:
        """``{side: facts}`` for ``run.json``: the interpreter path and its Python version for
        every side (this one for in-process sides), restarts and incidents for workers."""
        out: dict[str, dict[str, Any]] = {}
        for side, spec in self.specs.items():
            w = self.workers.get(side)
            if w is not None:
                out[side] = w.meta()
            else:
                out[side] = {
                    "in_process": True,
                    "python": sys.executable,
                    "python_version": platform.python_version(),
                    "serializer": spec.serializer,
                    "parser": spec.parser,
                }
        return out

    def restarts(self) -> int:
        """Worker restarts over all sides."""
        return sum(w.restarts for w in self.workers.values())

    def close(self) -> None:
        """Stop every worker (idempotent)."""
        for w in self.workers.values():
            w.close()


def open_sides(cfg: Any) -> Sides:
    """The :class:`Sides` of ``cfg``, resolved once and kept on it (``cfg._sides``): the render
    and re-stream stages and the validation share the same workers.

    Raises :class:`SideError` (a ValueError) for a side that cannot start, and the spec errors of
    :func:`replay.tools.get_serializer` for an in-process serializer."""
    sides = getattr(cfg, "_sides", None)
    if sides is None:
        sides = Sides(side_specs(cfg), cfg.replay_timeout)
        cfg._sides = sides
    return sides


def close_sides(cfg: Any) -> dict[str, dict[str, Any]] | None:
    """Stop ``cfg``'s workers; returns their :meth:`Sides.meta` (None when none were opened)."""
    sides = getattr(cfg, "_sides", None)
    if sides is None:
        return None
    cfg._sides = None
    sides.close()
    return sides.meta()
