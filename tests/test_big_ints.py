"""Integers beyond 64 bits survive every decode and encode (issue #20): orjson reads
``12345678901234567890123456789`` as ``1.2345678901234568e+28`` and refuses to write the int.

A capture with 25- and 29-digit integers in a tool schema, in an assistant message's tool-call
arguments (an object, and a JSON string), in the request's ``seed``, and in the tool-call
arguments of a raw completion (whole-text parse and every streamed chunking) and of a served SSE
stream is audited; the digits must be in ``exchanges.request_json``, ``tools.tool_json``, every
side's rendered prompt (re-rendered here, checked against the judged SHA-256) and the calls."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from replay import exactjson
from replay.cli import app

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "samples" / "templates" / "agent-new.jinja"

MAX = 1234567890123456789012345  # 25 digits: in the tool schema
ARG = 1234567890123456789012346  # in the assistant message's tool-call arguments (an object)
ARG_TEXT = 9876543210987654321098765  # in its arguments given as a JSON string
SEED = 12345678901234567890123456789  # 29 digits
NEG = -9223372036854775809  # one below int64: orjson's float too
RAW_ARG = 5555555555555555555555555  # in the raw completion's call

TOOL = {"type": "function", "function": {"name": "set_limit", "description": "Set a limit.", "parameters": {
    "type": "object", "properties": {"limit": {"type": "integer", "minimum": NEG, "maximum": MAX}}, "required": ["limit"]}}}
REQUEST = {
    "model": "Qwen/Qwen3-32B",
    "messages": [
        {"role": "user", "content": "Set the limit."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "set_limit", "arguments": {"limit": ARG}}},
            {"id": "c1", "type": "function", "function": {"name": "set_limit", "arguments": json.dumps({"limit": ARG_TEXT})}},
        ]},
        {"role": "tool", "tool_call_id": "c0", "content": "ok"},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ],
    "tools": [TOOL],
    "seed": SEED,
}
RAW = '<tool_call>\n{"name": "set_limit", "arguments": {"limit": %d}}\n</tool_call>' % RAW_ARG


def _v1_line() -> str:
    # the stdlib writes the ints exactly: the capture holds the digits as a client sends them
    return json.dumps({"id": "big-1", "route": "chat.completions", "model": "Qwen/Qwen3-32B", "request": REQUEST,
                       "server": {"output_text": RAW}})


def _sse() -> str:
    chunk = {"id": "s", "object": "chat.completion.chunk", "model": "Qwen/Qwen3-32B", "choices": [{"index": 0, "delta": {
        "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "set_limit", "arguments": '{"limit": %d}' % RAW_ARG}}]}, "finish_reason": None}]}
    end = {"id": "s", "object": "chat.completion.chunk", "model": "Qwen/Qwen3-32B", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    return f": request {json.dumps({**REQUEST, 'stream': True})}\n\ndata: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\ndata: [DONE]\n\n"


def test_exactjson_keeps_digits() -> None:
    text = b'{"a": 12345678901234567890123456789, "b": [-9223372036854775809, 18446744073709551616], "c": 1.5, "d": "x"}'
    assert orjson.loads(text)["a"] == pytest.approx(1.2345678901234568e28)  # what orjson alone does
    got = exactjson.loads(text)
    assert got == {"a": 12345678901234567890123456789, "b": [-9223372036854775809, 18446744073709551616], "c": 1.5, "d": "x"}
    assert exactjson.loads(text.decode()) == got and exactjson.loads(memoryview(text)) == got
    assert exactjson.dumps(got) == b'{"a":12345678901234567890123456789,"b":[-9223372036854775809,18446744073709551616],"c":1.5,"d":"x"}'
    # in range: orjson's own value and bytes; a digit run in a string alone reads the text again, to the same value
    assert exactjson.loads(b'[18446744073709551615, -9223372036854775808, "12345678901234567890123", 1e+30]') == [
        18446744073709551615, -9223372036854775808, "12345678901234567890123", 1e30]
    assert exactjson.dumps({"x": [1, 2.5, None]}, option=orjson.OPT_SORT_KEYS) == orjson.dumps({"x": [1, 2.5, None]})
    with pytest.raises(orjson.JSONDecodeError):  # orjson still decides what is JSON (NaN is not)
        exactjson.loads(b'[NaN, 12345678901234567890123]')
    # a long text (scanned with Hyperscan where installed): the run found at its end, and no run found
    pad = "x" * 5000
    long_text = json.dumps({"pad": pad, "n": SEED, "m": [1, 22, 333] * 100}).encode()
    assert exactjson.may_hold_big_int(long_text) and exactjson.may_hold_big_int(memoryview(long_text))
    assert exactjson.loads(memoryview(long_text))["n"] == SEED
    assert not exactjson.may_hold_big_int(long_text.replace(str(SEED).encode(), b"123456789012345678"))  # 18 digits
    # the out-of-process sides' protocol (replay.worker, which does not import orjson-only modules)
    from replay.worker import loads as worker_loads

    assert worker_loads(long_text)["n"] == SEED and worker_loads(b'{"n": %d}' % NEG) == {"n": NEG}


def test_har_with_a_big_int_outside_the_bodies(tmp_path: Path) -> None:
    """ijson's C backend stopped the whole HAR with ``integer overflow`` (a valid HAR, ``bad-json``)."""
    from replay.capture import ingest

    har = json.loads((ROOT / "samples" / "formats" / "gateway.har").read_text())
    entries = har["log"]["entries"]
    entries[1]["time"] = SEED  # in the HAR's own fields, after the first entry (already yielded by yajl)
    body = json.loads(entries[1]["request"]["postData"]["text"])
    body["tools"] = [TOOL]
    entries[1]["request"]["postData"]["text"] = json.dumps(body)
    (tmp_path / "big.har").write_text(json.dumps(har))
    stats = ingest(tmp_path / "big.har", tmp_path / "run")
    assert (stats.exchanges, stats.errors, stats.skipped) == (2, 0, 1)
    rows = pq.read_table(tmp_path / "run" / "exchanges.parquet").to_pylist()
    assert [r["source_line"] for r in rows] == [2, 3]
    assert json.loads(rows[0]["request_json"])["tools"] == [TOOL]


def test_big_ints_survive_the_audit(tmp_path: Path) -> None:
    caps = tmp_path / "caps"
    caps.mkdir()
    (caps / "big.jsonl").write_text(_v1_line() + "\n")
    (caps / "big.sse").write_text(_sse())
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["audit", str(caps), "--out", str(run), "--chat-template", str(TEMPLATE), "--quiet",
                                  "--chunkings", "whole,char,fixed-2,fixed-3,fixed-13,random-7", "--jobs", "1"])
    assert res.exit_code == 0, res.output

    exchanges = pq.read_table(run / "exchanges.parquet").to_pylist()
    assert sorted(e["capture_format"] for e in exchanges) == ["sse", "v1"]
    for ex in exchanges:
        request = json.loads(ex["request_json"])  # the stdlib: exact
        assert request["tools"] == [TOOL] and request["seed"] == SEED
        assert request["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"limit": ARG}
        assert json.loads(ex["tools_json"]) == [TOOL]
    served = next(e for e in exchanges if e["capture_format"] == "sse")["served_tool_calls"]
    assert [json.loads(c["arguments"]) for c in served] == [{"limit": RAW_ARG}]
    tools = pq.read_table(run / "tools.parquet").to_pylist()
    assert [json.loads(t["tool_json"]) for t in tools] == [TOOL, TOOL]

    # every side's prompt, re-rendered from the run's options as `replay show` does, is the prompt judged
    from replay.stages.context import stage_context
    from replay.render.exchange import render_rows
    from replay.show import spec_from_options

    meta = json.loads((run / "run.json").read_text())
    ctx = stage_context(spec_from_options(meta["options"]))
    renders = {(r["exchange_id"], r["side"]): r for r in pq.read_table(run / "renders.parquet").to_pylist()}
    for ex in exchanges:
        prompts: dict[str, str] = {}
        render_rows(dict(ex), ctx.cfg, ctx.sides.serializers, prompts=prompts)
        assert sorted(prompts) == ["new", "old", "reference"]
        for side, prompt in prompts.items():
            assert renders[(ex["exchange_id"], side)]["error"] is None
            assert hashlib.sha256(prompt.encode()).hexdigest() == renders[(ex["exchange_id"], side)]["prompt_sha256"]
            for n in (MAX, NEG, ARG, ARG_TEXT):
                assert str(n) in prompt, (side, n)
            assert "e+24" not in prompt and "e+18" not in prompt

    # the raw completion's call: the whole-text parse and every streamed chunking, joined, keep the digits
    calls = pq.read_table(run / "calls.parquet").to_pylist()
    mine = [c for c in calls if c["exchange_id"] == "big-1"]
    assert {c["chunking"] for c in mine} >= {"parse", "whole", "char", "fixed-2", "fixed-3", "fixed-13"}
    assert all(json.loads(c["arguments"]) == {"limit": RAW_ARG} for c in mine), {c["arguments"] for c in mine}
    assert all(c["arguments_json_ok"] and c["matches_whole"] is not False for c in mine)
