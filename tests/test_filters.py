"""Filters and sampling of `ingest` and `audit` (replay/capture/filters.py): exact counts for
each filter, filtered-out exchanges counted (not errors), sampling deterministic by a hash of the
exchange id or of another field, and what was kept said in run.json and the reports."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import pytest

from replay.capture import ingest
from replay.capture.filters import Filters, describe_kept, parse_fraction
from replay.capture.timestamps import TimestampError, parse_ts
from sides_data import TOOL, call_text, query_json, runner
from replay.cli import app

N = 40
MODELS = ["Qwen/Qwen3-8B", "Qwen/Qwen3-32B", "meta-llama/Llama-3.1-8B", "gpt-4.1"]
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def when(i: int) -> dt.datetime:
    return T0 + dt.timedelta(hours=i)


def ts_field(i: int):
    """Exchange i's `ts` in one of the forms captures write (every 10th has none)."""
    t = when(i)
    return [
        t.strftime("%Y-%m-%dT%H:%M:%SZ"),
        int(t.timestamp()),  # epoch seconds
        int(t.timestamp() * 1000),  # epoch milliseconds
        (t + dt.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S+02:00"),
        str(t.timestamp()),  # epoch seconds as text
        None,
    ][i % 5 if i % 10 else 5]


def record(i: int) -> dict:
    model = MODELS[i % 4]
    route = "messages" if i % 5 == 0 else "chat.completions"
    request = {"model": model, "messages": [{"role": "user", "content": f"task {i}"}], "tools": [TOOL],
               "metadata": {"session_id": f"s{i // 4}"}}
    if route == "messages":
        request["max_tokens"] = 64
        request["tools"] = [{"name": "read", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]
    rec = {"id": f"e{i:02d}", "route": route, "model": model, "request": request, "server": {"output_text": call_text("read")}}
    if ts_field(i) is not None:
        rec["ts"] = ts_field(i)
    return rec


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cap") / "c.jsonl"
    lines = [json.dumps(record(i)) for i in range(N)]
    lines.insert(7, "{not json")  # an error line stays an error, whatever the filters
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def kept_ids(out: Path) -> list[str]:
    return [r["exchange_id"] for r in query_json(out, "SELECT exchange_id FROM exchanges ORDER BY source_line")]


def ingest_with(capture: Path, out: Path, *args: str, nothing_kept: bool = False) -> dict:
    """Ingest with the filter options ``args``; ``nothing_kept``: every exchange is filtered out,
    so the command writes the run and exits 1 saying so."""
    result = runner.invoke(app, ["ingest", str(capture), "--out", str(out), "-q", *args])
    assert result.exit_code == (1 if nothing_kept else 0), result.output
    if nothing_kept:
        assert f"error: no exchange in {capture}:" in result.output and "dropped by the filters" in " ".join(result.output.split())
    return json.loads((out / "run.json").read_text(encoding="utf-8"))


def check_counts(meta: dict, kept: int, by: dict[str, int]) -> None:
    ing = meta["ingest"]
    assert ing["exchanges"] == kept and ing["filtered"] == N - kept and ing["filtered_by"] == by
    assert ing["errors"] == 1  # the broken line: an error, never "filtered"
    assert ing["lines"] - ing["blank_lines"] - ing["skipped"] - ing["filtered"] == ing["exchanges"] + ing["errors"]
    assert meta["filters"]["kept"] == kept and meta["filters"]["seen"] == N


def test_model_globs(capture, tmp_path):
    meta = ingest_with(capture, tmp_path / "a", "--model", "Qwen/*")
    check_counts(meta, 20, {"model": 20})
    assert kept_ids(tmp_path / "a") == [f"e{i:02d}" for i in range(N) if i % 4 in (0, 1)]
    assert meta["filters"]["sentence"] == "kept 20 of 40 exchanges; model Qwen/*"
    meta = ingest_with(capture, tmp_path / "b", "--model", "Qwen/*-8B", "--model", "gpt-*")
    check_counts(meta, 20, {"model": 20})
    assert kept_ids(tmp_path / "b") == [f"e{i:02d}" for i in range(N) if i % 4 in (0, 3)]
    meta = ingest_with(capture, tmp_path / "c", "--model", "qwen/*", nothing_kept=True)  # case-sensitive, as model names are
    check_counts(meta, 0, {"model": 40})


def test_route(capture, tmp_path):
    meta = ingest_with(capture, tmp_path / "a", "--route", "messages")
    check_counts(meta, 8, {"route": 32})
    assert kept_ids(tmp_path / "a") == [f"e{i:02d}" for i in range(0, N, 5)]
    meta = ingest_with(capture, tmp_path / "b", "--route", "messages", "--model", "Qwen/*")
    check_counts(meta, 4, {"model": 20, "route": 16})  # e00 e05 e20 e25 are Qwen messages... i%4 in (0,1)
    assert kept_ids(tmp_path / "b") == ["e00", "e05", "e20", "e25"]


def test_since_until_read_every_form_of_ts(capture, tmp_path):
    # hours 10..29 kept but e10 and e20, which have no ts (no-ts: e00 e10 e20 e30); naive: UTC
    meta = ingest_with(capture, tmp_path / "b", "--since", "2026-01-01T10:00:00Z", "--until", "2026-01-02T06:00:00")
    assert kept_ids(tmp_path / "b") == [f"e{i:02d}" for i in range(10, 30) if i % 10]
    check_counts(meta, 18, {"no-ts": 4, "since": 9, "until": 9})
    epoch = str(int(when(35).timestamp()))
    meta = ingest_with(capture, tmp_path / "c", "--since", epoch)
    assert kept_ids(tmp_path / "c") == ["e35", "e36", "e37", "e38", "e39"]
    assert meta["filters"]["sentence"] == f"kept 5 of 40 exchanges; since {when(35).isoformat()}; 4 dropped for having no timestamp"


def test_since_says_how_many_had_no_timestamp(capture, tmp_path):
    """An exchange without a readable ts cannot be placed in a time window, so --since drops it
    (e00 e10 e20 e30 here): the ingest line, run.json's filters and the filters' sentence (the
    reports' ``Filters:`` line) say how many, apart from those before --since (e01..e09)."""
    result = runner.invoke(app, ["ingest", str(capture), "--out", str(tmp_path / "a"), "-q", "--since", "2026-01-01T10:00:00Z"])
    assert result.exit_code == 0, result.output
    out = result.output.splitlines()
    assert out[0] == "41 lines: 27 exchanges, 1 error, 13 filtered out (4 for having no timestamp)"
    sentence = f"kept 27 of 40 exchanges; since {when(10).isoformat()}; 4 dropped for having no timestamp"
    assert out[1] == sentence
    meta = json.loads((tmp_path / "a" / "run.json").read_text(encoding="utf-8"))
    check_counts(meta, 27, {"no-ts": 4, "since": 9})
    assert meta["filters"]["no_timestamp"] == 4 and meta["filters"]["sentence"] == sentence
    # without a time window nothing is dropped for its timestamp, and nothing is said about it
    meta = ingest_with(capture, tmp_path / "b", "--model", "Qwen/*")
    assert meta["filters"]["no_timestamp"] == 0 and "timestamp" not in meta["filters"]["sentence"]


def point(key: str) -> float:
    """Sampling's rule as the docs state it: SHA-256 of the key, first 8 bytes, over 2**64."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


def test_sample_is_deterministic_by_exchange_id(capture, tmp_path):
    want = [f"e{i:02d}" for i in range(N) if point(f"e{i:02d}") < 0.3]
    assert 4 <= len(want) <= 20
    meta = ingest_with(capture, tmp_path / "a", "--sample", "30%")
    check_counts(meta, len(want), {"sample": N - len(want)})
    assert kept_ids(tmp_path / "a") == want
    assert meta["filters"]["sentence"] == f"sampled 30%: {len(want)} of 40 exchanges"
    ingest_with(capture, tmp_path / "b", "--sample", "0.3")
    assert kept_ids(tmp_path / "b") == want  # the same on every run
    ingest_with(capture, tmp_path / "c", "--sample", "0.1")
    assert set(kept_ids(tmp_path / "c")) <= set(want)  # a smaller fraction keeps a subset
    meta = ingest_with(capture, tmp_path / "d", "--sample", "1")
    check_counts(meta, N, {})


def test_sample_key_keeps_sessions_whole(capture, tmp_path):
    sessions = {f"s{k}" for k in range(N // 4) if point(f"s{k}") < 0.5}
    want = [f"e{i:02d}" for i in range(N) if f"s{i // 4}" in sessions]
    meta = ingest_with(capture, tmp_path / "a", "--sample", "0.5", "--sample-key", "request.metadata.session_id")
    assert kept_ids(tmp_path / "a") == want and len(want) % 4 == 0
    check_counts(meta, len(want), {"sample": N - len(want)} if len(want) < N else {})
    assert meta["filters"]["sentence"].startswith(f"sampled 50% by request.metadata.session_id: {len(want)} of 40 exchanges")
    models = {m for m in MODELS if point(m) < 0.5}
    ingest_with(capture, tmp_path / "b", "--sample", "0.5", "--sample-key", "model")
    assert kept_ids(tmp_path / "b") == [f"e{i:02d}" for i in range(N) if MODELS[i % 4] in models]


def test_limit_keeps_the_first_that_pass(capture, tmp_path):
    meta = ingest_with(capture, tmp_path / "a", "--limit", "7")
    check_counts(meta, 7, {"limit": 33})
    assert kept_ids(tmp_path / "a") == [f"e{i:02d}" for i in range(7)]
    meta = ingest_with(capture, tmp_path / "b", "--limit", "3", "--model", "gpt-*")
    check_counts(meta, 3, {"model": 30, "limit": 7})
    assert kept_ids(tmp_path / "b") == ["e03", "e07", "e11"]
    assert meta["filters"]["sentence"] == "kept 3 of 40 exchanges; model gpt-*; at most 3"


def test_audit_filters_and_says_so(capture, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", str(capture), "--out", str(out), "-q", "--model", "Qwen/*", "--sample", "50%", "--chunkings", "whole"])
    assert result.exit_code == 0, result.output
    want = [f"e{i:02d}" for i in range(N) if i % 4 in (0, 1) and point(f"e{i:02d}") < 0.5]
    assert kept_ids(out) == want
    sentence = f"sampled 50%: {len(want)} of 40 exchanges; model Qwen/*"
    meta = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert meta["filters"]["sentence"] == sentence
    assert meta["filters"]["options"]["models"] == ["Qwen/*"] and meta["filters"]["options"]["sample"] == 0.5
    assert sentence in result.output
    assert f"Filters: {sentence}." in (out / "report.md").read_text(encoding="utf-8")
    result = runner.invoke(app, ["query", "verdicts", "--run", str(out), "--format", "json"])
    verdicts = {r["check"]: r for r in json.loads(result.output)}
    assert verdicts["null-leak"]["exchanges"] == len(want)


def test_library_ingest_counts_without_cli(capture, tmp_path):
    stats = ingest(capture, tmp_path / "x", filters=Filters(routes=("messages",), limit=2))
    assert (stats.exchanges, stats.filtered, stats.filtered_by, stats.errors) == (2, 38, {"route": 32, "limit": 6}, 1)
    assert "38 filtered out" in str(stats)


def test_parse_ts_forms():
    t = dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc)
    for form in ("2026-01-01T12:00:00Z", "2026-01-01T14:00:00+02:00", "2026-01-01 12:00:00", 1767268800, "1767268800",
                 1767268800000, 1767268800.0, "1767268800000000", 1767268800 * 10**9):
        assert parse_ts(form) == t, form
    assert parse_ts("2026-01-01") == t.replace(hour=0)
    for bad in (None, "", "yesterday", True, "2026-13-01", [1]):
        with pytest.raises(TimestampError):
            parse_ts(bad)


def test_fractions_and_bad_values():
    assert parse_fraction("10%") == pytest.approx(0.1) and parse_fraction("0.25") == 0.25 and parse_fraction("1") == 1
    for bad in ("0", "0%", "1.5", "150%", "-0.1", "a", ""):
        with pytest.raises(ValueError):
            parse_fraction(bad)
    assert describe_kept({"sample": 0.1, "models": ["Qwen/*"]}, 12345, 123456) == "sampled 10%: 12,345 of 123,456 exchanges; model Qwen/*"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sample", "0"], "Invalid value for '--sample': '0' is not a fraction in (0, 1]"),
        (["--since", "soon"], "Invalid value for '--since': 'soon' is not a time: ISO 8601"),
        (["--until", "2026-02-30"], "Invalid value for '--until'"),
        (["--route", "chat"], "Invalid value for '--route': unknown route 'chat'; one of: chat.completions, messages, responses"),
        (["--limit", "0"], "Invalid value for '--limit'"),
        (["--sample", "0.5", "--sample-key", "session"], "Invalid value for '--sample-key': 'session' is neither request.PATH"),
        (["--sample-key", "request."], "Invalid value for '--sample-key'"),
        (["--since", "2026-02-01", "--until", "2026-01-01"], "--since 2026-02-01T00:00:00+00:00 is not before --until"),
    ],
)
def test_bad_filter_values_exit_2(capture, tmp_path, args, message):
    for command in ("ingest", "audit"):
        result = runner.invoke(app, [command, str(capture), "--out", str(tmp_path / command), "-q", *args])
        assert result.exit_code == 2, result.output
        assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
        assert not (tmp_path / command).exists()
