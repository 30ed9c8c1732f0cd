"""Sides that fail: plugin parsers that return values of the wrong shape (each a row error, in
process and in a worker), and framework specs (`vllm/NAME`) naming a tokenizer that does not exist
or does not load (a spec error that stops the audit at the start)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parent.parent

GARBAGE = '''
from replay.parsers.hermes import HermesParser
from replay.parsers.base import StreamDelta, CallDelta, ParseResult, ToolCall

class FeedStr(HermesParser):
    def feed(self, delta): return "hello"

class HugeIndex(HermesParser):
    def feed(self, delta):
        d = super().feed(delta)
        return StreamDelta(d.content, [CallDelta(10**12, c.name, c.arguments) for c in d.calls], d.reasoning)

class NegIndex(HermesParser):
    def feed(self, delta):
        d = super().feed(delta)
        return StreamDelta(d.content, [CallDelta(-1, c.name, c.arguments) for c in d.calls], d.reasoning)

class StrIndex(HermesParser):
    def feed(self, delta):
        d = super().feed(delta)
        return StreamDelta(d.content, [CallDelta("0", c.name, c.arguments) for c in d.calls], d.reasoning)

class IntName(HermesParser):
    def feed(self, delta):
        d = super().feed(delta)
        return StreamDelta(d.content, [CallDelta(c.index, 42 if c.name else None, c.arguments) for c in d.calls], d.reasoning)

class ParseDictArgs(HermesParser):
    def parse(self, text):
        r = super().parse(text)
        return ParseResult(r.content, tuple(ToolCall(c.name, {"x": 1}) for c in r.calls), r.reasoning)

class CallsNone(HermesParser):
    def feed(self, delta):
        d = super().feed(delta)
        return StreamDelta(d.content, None, d.reasoning)

class ParseNone(HermesParser):
    def parse(self, text): return None

class ParseCallDicts(HermesParser):
    def parse(self, text):
        r = super().parse(text)
        return ParseResult(r.content, [{"name": c.name, "arguments": c.arguments} for c in r.calls], r.reasoning)
'''

# class -> (side's chunking whose rows carry the error, a fragment of that error, rows with it:
# 7 coding-agent completions, 6 of them with calls)
CASES = {
    "FeedStr": ("whole", "feed() returned str 'hello', not a StreamDelta", 7),
    "HugeIndex": ("whole", "call index 1000000000000, outside 0..2147483647", 6),
    "NegIndex": ("whole", "call index -1, outside", 6),
    "StrIndex": ("whole", "call index str '0', not an int", 6),
    "IntName": ("whole", "call 0 name is int 42, not a string", 6),
    "ParseDictArgs": ("parse", ") arguments is dict {'x': 1}, not a string", 6),
    "CallsNone": ("whole", "feed() returned calls of type NoneType, not a list", 7),
    "ParseNone": ("parse", "parse() returned NoneType None, not a ParseResult", 7),
    "ParseCallDicts": ("parse", "parse() call 0 is dict", 6),
}


def _audit(tmp_path: Path, cls: str, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    plugin = tmp_path / "garbage.py"
    plugin.write_text(GARBAGE)
    out = tmp_path / f"run-{cls}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-m", "replay", "audit", str(ROOT / "samples" / "coding-agent.jsonl"), "--out", str(out),
         "--new-parser", f"{plugin}:{cls}", "--chunkings", "whole", *extra],
        check=False, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )
    return proc, out


@pytest.mark.parametrize("cls", sorted(CASES))
def test_garbage_parser_results_are_row_errors(tmp_path: Path, cls: str) -> None:
    """A plugin returning a value of the wrong shape from parse()/feed() gives each affected row
    an error naming the fault; the audit finishes (exit 0, no traceback). Before the fix,
    HugeIndex/StrIndex/IntName/Parse* stopped the audit with a traceback or an Arrow error, and
    NegIndex was silently accepted."""
    proc, out = _audit(tmp_path, cls)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    chunking, fragment, n = CASES[cls]
    rows = pq.read_table(out / "streams.parquet").to_pylist()
    new = [r for r in rows if r["side"] == "new" and r["chunking"] == chunking]
    errors = [r["error"] for r in new if r["error"]]
    assert len(errors) == n, (errors, [r["error"] for r in new])
    assert all("PluginResultError" in e and fragment in e for e in errors), errors
    # the old side (built-in parser) is unaffected
    old = [r for r in rows if r["side"] == "old" and r["chunking"] == chunking]
    assert old and not any(r["error"] for r in old)


def test_garbage_parser_in_a_worker(tmp_path: Path) -> None:
    """The same check runs inside a worker side (--new-python): the fault is recorded per row."""
    proc, out = _audit(tmp_path, "StrIndex", "--new-python", sys.executable, "--new-pythonpath", str(ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = pq.read_table(out / "streams.parquet").to_pylist()
    errors = [r["error"] for r in rows if r["side"] == "new" and r["chunking"] == "whole" and r["error"]]
    assert len(errors) == 6 and all("call index str '0', not an int" in e for e in errors), errors


def test_vllm_tokenizer_that_does_not_load_is_a_spec_error(tmp_path: Path) -> None:
    """``vllm/hermes?tokenizer=PATH`` (or $REPLAY_VLLM_TOKENIZER) naming a missing or broken file
    is an AdapterError naming the spec and the path when the side is resolved, not a misleading
    per-row error ("Couldn't instantiate the backend tokenizer ... sentencepiece") on every row."""
    from replay.adapters import AdapterError
    from replay.adapters.vllm import check_tokenizer

    missing = tmp_path / "nope" / "tokenizer.json"
    with pytest.raises(AdapterError, match=r"vllm/hermes: tokenizer .*nope/tokenizer.json \(from \?tokenizer=\) does not exist"):
        check_tokenizer("vllm/hermes", str(missing), "?tokenizer=")
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json")
    with pytest.raises(AdapterError, match=r"vllm/hermes: tokenizer .*tokenizer.json \(from \$REPLAY_VLLM_TOKENIZER\) does not load: "):
        check_tokenizer("vllm/hermes", str(broken), "$REPLAY_VLLM_TOKENIZER")
    assert check_tokenizer("vllm/hermes", None, "?tokenizer=") is None


VLLM_VENV = Path(os.environ.get("REPLAY_ENGINES_CACHE", Path.home() / ".cache" / "replay-engines")) / "vllm-0.33.0" / "bin" / "python"


@pytest.mark.engines
@pytest.mark.skipif(not VLLM_VENV.exists(), reason="no cached vLLM 0.33.0 venv (tests/engines.py builds it)")
def test_vllm_missing_tokenizer_stops_the_audit_at_start(tmp_path: Path) -> None:
    """The same through the CLI in a real vLLM venv: exit 1 with the error, before any work."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REPLAY_VLLM_TOKENIZER")}
    proc = subprocess.run(
        [sys.executable, "-m", "replay", "audit", str(ROOT / "samples" / "coding-agent.jsonl"), "--out", str(tmp_path / "run"),
         "--new-python", str(VLLM_VENV), "--new-parser", f"vllm/hermes?tokenizer={tmp_path}/none.json"],
        check=False, cwd=ROOT, capture_output=True, text=True, env=env, timeout=600,
    )
    assert proc.returncode == 1, proc.stdout[-1000:]
    assert f"vllm/hermes: tokenizer {tmp_path}/none.json (from ?tokenizer=) does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "streams.parquet").exists()
