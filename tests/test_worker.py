"""The worker process and its supervision: the protocol, crashes, hangs, and sides that cannot
start. Workers here run in this interpreter (``--old-python sys.executable``); the second-venv
case is in tests/test_sides.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replay.sides import SideSpec, WorkerError, WorkerSide
from replay.worker import dumps, loads
from sides_data import ROOT, call_text, invoke, query_json, summary, write_capture

PY = sys.executable
NAMES = [["read"], ["read", "boom"], ["edit"], ["write"]]  # x1 is the exchange the plugins fail on


def _plugin(tmp_path: Path, body: str) -> str:
    """A Hermes parser plugin file whose parse and feed run ``body`` (with ``text`` bound) first."""
    path = tmp_path / "faulty.py"
    path.write_text(
        "import ctypes, os, signal, sys, time\n"
        "from replay.parsers.hermes import HermesParser\n"
        "class Faulty(HermesParser):\n"
        "    def parse(self, text):\n"
        f"        {body}\n"
        "        return super().parse(text)\n"
    )
    return f"{path}:Faulty"


def _audit(tmp_path: Path, *args: str) -> Path:
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    out = tmp_path / "run"
    result = invoke("audit", capture, "--out", out, "-q", "--chunkings", "whole,char", *args)
    assert result.exit_code == 0, result.output
    return out


def _old_rows(out: Path) -> dict[str, list[dict]]:
    rows = query_json(out, "SELECT exchange_id, chunking, error, calls_streamed FROM streams WHERE side = 'old' ORDER BY exchange_id, chunking")
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["exchange_id"], []).append(r)
    return by


@pytest.mark.parametrize(
    "body, message",
    [
        ("if 'boom' in text: os._exit(3)", "WorkerError: the worker exited (exit code 3)"),
        ("if 'boom' in text: ctypes.string_at(0)", "WorkerError: the worker exited (killed by SIGSEGV)"),
    ],
    ids=["os._exit", "segfault"],
)
def test_a_crash_on_one_exchange_is_that_exchanges_error(tmp_path: Path, body: str, message: str) -> None:
    out = _audit(tmp_path, "--old-python", PY, "--old-parser", _plugin(tmp_path, body))
    by = _old_rows(out)
    # x1: its parse row and both chunkings carry the crash; the worker is restarted for x2, x3
    assert [r["chunking"] for r in by["x1"]] == ["char", "parse", "whole"]
    assert all(r["error"].startswith(message) for r in by["x1"]), by["x1"]
    for xid in ("x0", "x2", "x3"):
        assert [r["error"] for r in by[xid]] == [None, None, None]
        assert [r["calls_streamed"] for r in by[xid]] == [1, 1, 1]
    assert summary(out)["new"]["calls_dropped"] == 0
    meta = json.loads((out / "run.json").read_text())
    assert meta["sides"]["old"]["restarts"] == 1
    assert meta["sides"]["old"]["incidents"][0]["exchange_id"] == "x1"
    assert meta["sides"]["old"]["incidents"][0]["error"].startswith(message.removeprefix("WorkerError: "))
    report = (out / "report.md").read_text()
    assert "restarted 1 time (first: exchange `x1`: the worker exited" in report
    assert "3 old-side replays failed" in report


def test_a_hang_the_worker_cannot_interrupt_is_killed_and_restarted(tmp_path: Path) -> None:
    """SIGALRM blocked, then sleep: the worker's own deadline cannot fire, the parent kills it
    after replay_timeout x 3 operations + 2 s."""
    body = "if 'boom' in text: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM}); time.sleep(60)"
    out = _audit(tmp_path, "--old-python", PY, "--old-parser", _plugin(tmp_path, body), "--replay-timeout", "0.3")
    by = _old_rows(out)
    assert {r["error"] for r in by["x1"]} == {"WorkerError: the worker gave no answer in 2.9 s: killed"}
    assert all(r["error"] is None for xid in ("x0", "x2", "x3") for r in by[xid])
    assert json.loads((out / "run.json").read_text())["sides"]["old"]["restarts"] == 1


def test_a_hang_the_worker_can_interrupt_is_recorded_as_in_process(tmp_path: Path) -> None:
    """A plain sleep: the worker's deadline stops it, the rows are those of an in-process run
    (ReplayTimeout on the parse row only: feed does not sleep), and no restart is needed."""
    body = "if 'boom' in text: time.sleep(60)"
    plugin = _plugin(tmp_path, body)
    out = _audit(tmp_path, "--old-python", PY, "--old-parser", plugin, "--replay-timeout", "0.3")
    by = _old_rows(out)
    assert [(r["chunking"], r["error"]) for r in by["x1"]] == [
        ("char", None),
        ("parse", "ReplayTimeout: took more than 0.3 s"),
        ("whole", None),
    ]
    assert json.loads((out / "run.json").read_text())["sides"]["old"]["restarts"] == 0
    inproc = _audit(tmp_path / "in", "--old-parser", plugin, "--replay-timeout", "0.3")
    assert _old_rows(inproc) == by


@pytest.mark.parametrize("where", [(), ("--new-python", PY)], ids=["in-process", "worker"])
def test_a_feed_that_hangs_costs_one_timeout_per_exchange_not_per_chunking(tmp_path: Path, where: tuple[str, ...]) -> None:
    """The new side's ``feed`` sleeps: its first replay of each exchange times out, and its other
    chunkings (about 130 with the default chunkings) are not run but carry the same error, so the
    audit of 2 exchanges takes about 2 timeouts, not one per chunking (docs/sides.md)."""
    path = tmp_path / "hang.py"
    path.write_text(
        "import time\n"
        "from replay.parsers.hermes import HermesParser\n"
        "class Hang(HermesParser):\n"
        "    def feed(self, delta):\n"
        "        time.sleep(3600)\n"
    )
    capture = write_capture(tmp_path / "cap" / "c.jsonl", [["read"], ["edit"]])
    out = tmp_path / "run"
    t0 = time.monotonic()
    result = invoke("audit", capture, "--out", out, "-q", "--new-parser", f"{path}:Hang", "--replay-timeout", "0.5", *where)
    elapsed = time.monotonic() - t0
    assert result.exit_code == 0, result.output
    assert elapsed < 15, elapsed  # one chunking's timeout per exchange: the bound scales with exchanges
    rows = query_json(out, "SELECT side, exchange_id, chunking, error FROM streams WHERE side IN ('old', 'new') ORDER BY side, exchange_id, chunking")
    assert all(r["error"] is None for r in rows if r["side"] == "old")  # the built-in side is untouched
    new = {xid: [(r["chunking"], r["error"]) for r in rows if r["side"] == "new" and r["exchange_id"] == xid] for xid in ("x0", "x1")}
    for xid, got in new.items():
        names = [c for c, _ in got if c != "parse"]
        # a row for every chunking a plugin side replays (the defaults and every two-way split)
        assert len(names) > 50 and {"whole", "char", "fixed-2", "split-1"} <= set(names), (xid, names)
        assert dict(got)["parse"] is None  # parse() does not hang
        assert {e for c, e in got if c != "parse"} == {"ReplayTimeout: took more than 0.5 s"}, xid


def test_a_worker_that_cannot_restart_marks_the_rest_of_its_side(tmp_path: Path) -> None:
    """The crash on x1 leaves a file that makes the plugin's import fail: the restart fails, so
    x2 and x3 carry that error (no more attempts), the new side and the audit go on."""
    flag = tmp_path / "broken"
    path = tmp_path / "once.py"
    path.write_text(
        "import os\n"
        f"if os.path.exists({str(flag)!r}): raise ImportError('installation broke')\n"
        "from replay.parsers.hermes import HermesParser\n"
        "class Once(HermesParser):\n"
        "    def parse(self, text):\n"
        f"        if 'boom' in text: open({str(flag)!r}, 'w').close(); os._exit(3)\n"
        "        return super().parse(text)\n"
    )
    out = _audit(tmp_path, "--old-python", PY, "--old-parser", f"{path}:Once")
    by = _old_rows(out)
    assert all(r["error"] is None for r in by["x0"])
    assert all(r["error"].startswith("WorkerError: the worker exited (exit code 3)") for r in by["x1"])
    for xid in ("x2", "x3"):
        assert all("installation broke" in r["error"] and r["error"].startswith("WorkerError: --old-python") for r in by[xid]), by[xid]
    meta = json.loads((out / "run.json").read_text())["sides"]["old"]
    assert meta["restarts"] == 0 and "installation broke" in meta["dead"]
    assert summary(out)["new"]["calls_whole"] == 5
    assert "it could not be restarted" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--old", "python=/no/such/python"], "--old-python /no/such/python: cannot run it"),
        (["--new-python", PY, "--new-parser", "acme_nowhere:Parser"], "'acme_nowhere:Parser': importing acme_nowhere failed"),
        (["--new-python", PY, "--new-serializer", "nope"], "unknown serializer 'nope'"),
        (["--old-pythonpath", "/tmp"], "--old: pythonpath needs python=INTERPRETER"),
        (["--old-python", "/bin/false"], "--old-python /bin/false: the worker did not start: the worker exited (exit code 1)"),
    ],
    ids=["no-interpreter", "plugin-not-importable-there", "bad-serializer", "path-without-python", "not-a-python"],
)
def test_a_side_that_cannot_start_fails_before_any_work(tmp_path: Path, args: list[str], message: str) -> None:
    if args[1] == "/bin/false" and not Path(args[1]).exists():
        pytest.skip("no /bin/false")
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    out = tmp_path / "run"
    result = invoke("audit", capture, "--out", out, "-q", *args)
    assert result.exit_code == (2 if "pythonpath needs" in message else 1), result.output  # 2: a side value's usage error
    assert message in result.output
    assert not out.exists()


def test_a_replay_without_worker_first_on_the_path_fails_before_any_work(tmp_path: Path) -> None:
    # a plain venv: an editable install of replay in our own interpreter would serve
    # replay.worker from its import finder whatever comes first on the path
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    python = tmp_path / "v" / "bin" / "python"
    (tmp_path / "shadow" / "replay").mkdir(parents=True)
    (tmp_path / "shadow" / "replay" / "__init__.py").write_text("")  # an old replay without the worker
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    out = tmp_path / "run"
    result = invoke("audit", capture, "--out", out, "-q", "--old-python", python, "--old-pythonpath", tmp_path / "shadow")
    assert result.exit_code == 1, result.output
    assert "No module named replay.worker (a `replay` package without worker.py comes before" in result.output
    assert not out.exists()


def test_stream_and_render_commands_take_the_side_options(tmp_path: Path) -> None:
    out = _audit(tmp_path)
    result = invoke("stream", "--run", out, "--old-python", PY, "--old-parser", _plugin(tmp_path, "if 'boom' in text: os._exit(3)"), "-q")
    assert result.exit_code == 0, result.output
    meta = json.loads((out / "run.json").read_text())
    assert meta["sides"]["old"]["restarts"] == 1 and meta["sides"]["old"]["stage"] == "re-stream"
    assert meta["options"]["old_python"] == PY
    result = invoke("render", "--run", out, "--new-python", PY, "--new-serializer", "model-dump", "-q")
    assert result.exit_code == 0, result.output
    assert summary(out)["new"]["schemas_with_leaked_null"] == 4


# --- the worker itself ----------------------------------------------------------------------


def _worker(tmp_path: Path, parser: str | None = None, serializer: str = "model-dump", timeout: float = 5.0) -> WorkerSide:
    w = WorkerSide(SideSpec("old", serializer, parser, PY), timeout)
    w.start()
    return w


def test_worker_protocol_answers_in_order_and_prints_cannot_break_it(tmp_path: Path) -> None:
    """A parser that prints on stdout: the answers still parse; serialize and replay items come
    back one line each, in order, with the per-step events."""
    plugin = tmp_path / "noisy.py"
    plugin.write_text(
        "from replay.parsers.hermes import HermesParser\n"
        "class Noisy(HermesParser):\n"
        "    def feed(self, delta):\n"
        "        print('debug', delta)\n"
        "        return super().feed(delta)\n"
    )
    w = _worker(tmp_path, f"{plugin}:Noisy")
    try:
        assert w.parsers["hermes"]["name"] == "hermes" and "<tool_call>" in w.parsers["hermes"]["markers"]
        assert w.parsers["deepseek_v31"]["name"] == "deepseek_v31"  # a hermes plugin replaces only hermes
        text = call_text("read")
        w.submit("replay", [{"k": "a", "family": "hermes", "text": text, "tools": None, "reasoning_open": False, "chunkings": [[len(text)], [5] * 0 + [1] * len(text)]}], [3])
        (answer,) = w.collect()
        assert answer["k"] == "a"
        assert answer["parse"]["calls"] == [["read", '{"path": "read.py"}']]
        whole, char = answer["streams"]
        assert whole["events"][0][0] == 0 and whole["events"][0][1] == "Let me look.\n"
        joined = "".join(a for ev in char["events"] for _, _, a in ev[3])
        assert json.loads(joined) == {"path": "read.py"}
        w.submit("serialize", [{"k": 1, "tools": [{"type": "function", "function": {"name": "f"}}]}, {"k": 2, "tools": [{"function": 3}]}], [1, 1])
        ok, bad = w.collect()
        assert ok == {"k": 1, "tools": [{"type": "function", "function": {"name": "f", "description": None, "parameters": None, "strict": None}}]}
        assert bad["k"] == 2 and bad["error"].startswith("ToolDeclarationError: ")
        w.submit("replay", [{"k": "b", "family": "no_such_family", "text": "x", "chunkings": []}], [1])
        assert w.collect() == [{"k": "b", "error": "WorkerError: no tool parser family 'no_such_family' in this worker's replay"}]
    finally:
        w.close()
    assert w.proc is None


def test_lone_surrogates_cross_the_pipe() -> None:
    """orjson refuses lone surrogates; the protocol falls back to ASCII escapes both ways."""
    value = {"arguments": '{"a": "\ud800"}'}
    assert loads(dumps(value)) == value


def test_worker_imports_nothing_heavy() -> None:
    """The worker runs where only the stdlib and the user's package are: importing it and
    serving a replay and a serialize request loads none of typer/duckdb/pyarrow/transformers/rich."""
    code = (
        "import io, json, sys\n"
        "from replay.worker import serve\n"
        "text = '<tool_call>\\n{\"name\": \"f\", \"arguments\": {}}\\n</tool_call>'\n"
        "reqs = [{'op': 'init', 'protocol': 1, 'serializer': 'model-dump', 'parser': None, 'timeout': 1},\n"
        "        {'op': 'serialize', 'items': [{'k': 0, 'tools': [{'type': 'function', 'function': {'name': 'f'}}]}]},\n"
        "        {'op': 'replay', 'items': [{'k': 0, 'family': 'hermes', 'text': text, 'chunkings': [[len(text)]]}]}]\n"
        "out = io.BytesIO()\n"
        "serve(io.BytesIO(b''.join(json.dumps(r).encode() + b'\\n' for r in reqs)), out)\n"
        "assert len(out.getvalue().splitlines()) == 3, out.getvalue()\n"
        "heavy = {'typer', 'duckdb', 'pyarrow', 'transformers', 'rich', 'jinja2', 'zstandard', 'replay.stages.stream', 'replay.runner.driver', 'replay.cli'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    got = subprocess.run([PY, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "[]", got.stderr


def test_a_family_the_worker_does_not_know_is_an_error_on_that_sides_rows(tmp_path: Path) -> None:
    """``--parser file.py:Acme`` names a family (``acme``) only this process knows: the reference
    parses, the out-of-process old side answers each exchange with the error, the new side
    (in process) replays."""
    path = tmp_path / "acme.py"
    path.write_text("from replay.parsers.hermes import HermesParser\nclass Acme(HermesParser):\n    name = 'acme'\n")
    out = _audit(tmp_path, "--old-python", PY, "--parser", f"{path}:Acme")
    errors = query_json(out, "SELECT side, count(*) AS n, any_value(error) AS e FROM streams WHERE error IS NOT NULL GROUP BY side")
    assert errors == [{"side": "old", "n": 12, "e": "WorkerError: no tool parser family 'acme' in this worker's replay"}]
    assert summary(out)["new"]["calls_whole"] == 5


def test_an_answer_that_is_not_json_is_that_exchanges_error(tmp_path: Path) -> None:
    """A serializer returning a set (not JSON) on one request: that row gets the error, the
    worker stays up for the next one."""
    path = tmp_path / "sets.py"
    path.write_text("def serialize(tool):\n    return {'tags': {1, 2}} if tool['function']['name'] == 'odd' else tool\n")
    w = WorkerSide(SideSpec("new", f"{path}:serialize", None, PY), 5.0)
    w.start()
    try:
        tool = {"type": "function", "function": {"name": "f"}}
        odd = {"type": "function", "function": {"name": "odd"}}
        w.submit("serialize", [{"k": "a", "tools": [odd]}, {"k": "b", "tools": [tool]}], [1, 1])
        a, b = w.collect()
        assert a["k"] == "a" and a["error"].startswith("WorkerError: answer is not JSON: ")
        assert b == {"k": "b", "tools": [tool]}
        assert w.restarts == 0
    finally:
        w.close()


def test_worker_restarts_in_pool_processes_reach_run_json_and_the_report(tmp_path: Path) -> None:
    """With --jobs 2 over batches of 2 exchanges, the side's workers run in the pool processes
    (one per process): the crash on x1, recorded by the process that had x1's batch, is in
    run.json and report.md as for --jobs 1. That process restarts its worker when it next needs
    it: for a later batch if it gets one (the pool decides), so 0 or 1 restart."""
    body = "if 'boom' in text: os._exit(3)"
    out = _audit(tmp_path, "--old-python", PY, "--old-parser", _plugin(tmp_path, body), "--jobs", "2", "--batch-rows", "2")
    by = _old_rows(out)
    assert all(r["error"].startswith("WorkerError: the worker exited (exit code 3)") for r in by["x1"]), by["x1"]
    assert all(r["error"] is None for xid in ("x0", "x2", "x3") for r in by[xid])
    meta = json.loads((out / "run.json").read_text())
    old = meta["sides"]["old"]
    assert [i["exchange_id"] for i in old["incidents"]] == ["x1"] and old["restarts"] in (0, 1)
    assert 1 <= old["pool_processes"] <= 2
    assert meta["executors"]["stream"] == {"engine": "pool", "jobs": 2, "pool_restarts": 0, "batches_retried": 0, "batches_failed": 0}
    report = (out / "report.md").read_text()
    said = "restarted 1 time" if old["restarts"] == 1 else "1 incident"
    assert f"as a worker process; {said} (first: exchange `x1`: the worker exited" in report
