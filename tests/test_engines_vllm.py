"""Real vLLM releases (opt-in: ``python -m pytest -m engines tests/test_engines_vllm.py``): 0.11.0
as ``old``, 0.33.0 as ``new``, on the vLLM completions of engine_captures.py.

Each venv is about 2.2 GB (tests/engines.py: ``--no-deps vllm==X``, torch 2.13.0 CPU, about 30
small packages) and takes minutes to build; it is cached under ``$REPLAY_ENGINES_CACHE``.
Deselected by default (the ``engines`` marker, see pyproject.toml), so CI does not build them.
Asserted, as ``../shared/docs/real-engines.md`` lists them: Kimi K2's ``extract_tool_calls`` of
two calls gives one garbled call in 0.11.0; Hermes streaming content keeps an extra newline in
0.11.0; an undefined tool streams arguments ``''`` in 0.11.0 and ``'{}'`` in 0.33.0. Each side
runs ``vllm/hermes`` or ``vllm/kimi_k2`` (replay.adapters.vllm, on the marker tokenizer) through
tests/engine_driver.py inside the venv.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import engine_captures as cap
from engines import EngineBuildError, engine_python

pytestmark = pytest.mark.engines

ROOT = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).resolve().with_name("engine_driver.py")
RELEASES = {"old": "vllm==0.11.0", "new": "vllm==0.33.0"}


@pytest.fixture(scope="module")
def pythons() -> dict[str, Path]:
    try:
        return {side: engine_python(req) for side, req in RELEASES.items()}
    except EngineBuildError as exc:
        pytest.skip(f"cannot build the vLLM venvs here: {exc}")


def drive(python: Path, spec: str, items: list[dict]) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRANSFORMERS_VERBOSITY": "error"}
    proc = subprocess.run(
        [str(python), str(DRIVER), spec], input=json.dumps(items), capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def answers(pythons) -> dict[str, dict[str, dict]]:
    """side -> exchange id -> the driver's answer (recorded and whole chunkings)."""
    out: dict[str, dict[str, dict]] = {"old": {}, "new": {}}
    by_spec: dict[str, list[dict]] = {}
    for ex in cap.exchanges(cap.VLLM_COMPLETIONS):
        spec = "vllm/kimi_k2" if ex["model"] == cap.KIMI_MODEL else "vllm/hermes"
        by_spec.setdefault(spec, []).append(ex)
    for spec, exs in by_spec.items():  # one venv process per side and spec (vLLM imports in ~20 s)
        items = [{"text": ex["server"]["output_text"], "tools": ex["request"]["tools"], "chunkings": {"recorded": ex["server"]["steps"]}} for ex in exs]
        for side, python in pythons.items():
            out[side].update(zip((ex["id"] for ex in exs), drive(python, spec, items)))
    return out


def test_kimi_k2_whole_text_parse_of_two_calls(answers):
    old, new = answers["old"]["vl-kimi-two"]["parse"], answers["new"]["vl-kimi-two"]["parse"]
    assert old["calls"] == [["get_weather", '{"path": "notes/Oslo.md"}', 0]]  # one call: first name, second arguments
    assert new["calls"] == [["get_weather", '{"city": "Paris"}', 0], ["read", '{"path": "notes/Oslo.md"}', 1]]
    assert old["content"] == new["content"] == "Checking."
    for side in ("old", "new"):  # streamed, both releases get the two calls right
        assert [c[1] for c in answers[side]["vl-kimi-two"]["streams"]["recorded"]["calls"]] == ["get_weather", "read"]


def test_hermes_streaming_keeps_an_extra_newline_in_0_11(answers):
    old = answers["old"]["vl-hermes-two"]["streams"]["recorded"]
    new = answers["new"]["vl-hermes-two"]["streams"]["recorded"]
    assert old["content"] == "Comparing both.\n\n" and new["content"] == "Comparing both.\n"
    assert [c[1] for c in old["calls"]] == [c[1] for c in new["calls"]] == ["read", "get_weather"]
    assert [json.loads(c[2]) for c in old["calls"]] == [json.loads(c[2]) for c in new["calls"]]
    # the non-streaming answers agree
    assert answers["old"]["vl-hermes-two"]["parse"] == answers["new"]["vl-hermes-two"]["parse"]


def test_undefined_tool_streams_empty_arguments_in_0_11(answers):
    old = answers["old"]["vl-undefined"]["streams"]["recorded"]["calls"]
    new = answers["new"]["vl-undefined"]["streams"]["recorded"]["calls"]
    assert old == [[0, "get_time", ""]] and new == [[0, "get_time", "{}"]]


def test_audit_0_11_old_against_0_33_new(pythons, tmp_path):
    """One ``replay audit`` of the Hermes exchanges with each release as a side in its own venv
    (where the out-of-process side exists); the differences read from the run's tables. Measured
    here: old 3 of 3 calls dropped under at least one chunking, 3 non-JSON joins, 1 argument
    mismatch; new none."""
    if importlib.util.find_spec("replay.worker") is None:
        pytest.skip("this checkout has no out-of-process side (replay.worker, --old-python) yet")
    duckdb = pytest.importorskip("duckdb")
    hermes = {k: v for k, v in cap.VLLM_COMPLETIONS.items() if v[0] == cap.MODEL}
    capture = cap.write_capture(tmp_path / "vllm.jsonl", hermes)
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "replay", "audit", str(capture), "--out", str(run), "--quiet",
           "--old-python", str(pythons["old"]), "--old-parser", "vllm/hermes",
           "--new-python", str(pythons["new"]), "--new-parser", "vllm/hermes"]
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    con = duckdb.connect()
    streams = f"read_parquet('{run / 'streams.parquet'}')"
    calls = f"read_parquet('{run / 'calls.parquet'}')"
    assert con.execute(f"SELECT count(error) FROM {streams} WHERE side IN ('old', 'new')").fetchall() == [(0,)]
    content = dict(con.execute(f"SELECT side, content FROM {streams} WHERE exchange_id = 'vl-hermes-two' AND chunking = 'recorded' AND side IN ('old', 'new')").fetchall())
    assert content == {"old": "Comparing both.\n\n", "new": "Comparing both.\n"}
    undefined = dict(con.execute(f"SELECT side, arguments FROM {calls} WHERE exchange_id = 'vl-undefined' AND chunking = 'recorded' AND side IN ('old', 'new')").fetchall())
    assert undefined == {"old": "", "new": "{}"}
    summary = {r[0]: r[1:] for r in con.execute(
        f"""SELECT side, count(DISTINCT (exchange_id, index)) FILTER (WHERE NOT arguments_json_ok),
                   count(DISTINCT (exchange_id, index)) FILTER (WHERE arguments_json_ok AND NOT matches_whole)
            FROM {calls} WHERE side IN ('old', 'new') GROUP BY side"""
    ).fetchall()}
    assert summary == {"old": (3, 1), "new": (0, 0)}
