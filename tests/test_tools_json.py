"""The ``tools_json`` column of ``exchanges``: the request's ``tools`` as the JSON text
``request_json`` holds, written by ingest so the re-stream stage gets an exchange's tool
declarations without decoding its whole request. Checked against the plain way it replaces
(``orjson.loads(request_json)["tools"]``): after the secret scrub and ``--redact`` rewrote the
request, for every route, and for run folders written before the column existed."""

from __future__ import annotations

import json

import orjson
import pyarrow.parquet as pq
import pytest

from replay.capture.ingest import ingest
from replay.stages.stream import STREAM_COLUMNS
from replay.runner.driver import BatchRef, read_batch
from replay.stages.rows import exchange_rows, exchange_tools
from replay.prepare.base import openai_tools

SK = "sk-proj-4f9Qx2LmN8pR7sT1vW3yZ5aB6cD0eF"
TOOL = {"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                         "parameters": {"type": "object", "properties": {"path": {"type": "string", "default": None}}}}}
SECRET_TOOL = {"type": "function", "function": {"name": "deploy", "description": f"Deploy with key {SK}.", "parameters": {"type": "object"}}}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def _line(i: int, request: dict, route: str = "chat.completions") -> str:
    return json.dumps({"id": f"x{i}", "route": route, "model": "Qwen/Qwen3-8B", "request": request,
                       "server": {"output_text": "hello", "steps": ["hel", "lo"]}})


def _capture(tmp_path):
    msgs = [{"role": "user", "content": "hi"}]
    lines = [
        _line(0, {"messages": msgs, "tools": [TOOL]}),
        _line(1, {"messages": msgs, "tools": [TOOL]}),  # the same list again
        _line(2, {"messages": msgs}),  # no tools key
        _line(3, {"messages": msgs, "tools": None}),
        _line(4, {"messages": msgs, "tools": []}),
        _line(5, {"messages": msgs, "tools": [TOOL, SECRET_TOOL]}),  # rule 1 rewrites the request's tools
        _line(6, {"messages": msgs, "tools": [TOOL], "api_key": "abc"}),  # a secret name dropped: the request re-serialized
        _line(7, {"messages": [{"role": "user", "content": f"my key is {SK}"}], "tools": [TOOL]}),  # the scrub outside the tools
        _line(8, {"messages": msgs, "tools": [ANTHROPIC_TOOL], "max_tokens": 10}, route="messages"),
    ]
    path = tmp_path / "cap.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("redact", [False, True], ids=["scrub", "redact"])
def test_tools_json_is_the_tools_text_request_json_holds(tmp_path, redact):
    out = tmp_path / "run"
    ingest(_capture(tmp_path), out, redact=redact)
    rows = pq.read_table(out / "exchanges.parquet").to_pylist()
    assert len(rows) == 9
    for r in rows:
        request = orjson.loads(r["request_json"])
        assert r["tools_json"] is not None
        assert orjson.loads(r["tools_json"]) == request.get("tools"), r["exchange_id"]
    by_id = {r["exchange_id"]: r for r in rows}
    assert SK not in by_id["x5"]["tools_json"] and "deploy" in by_id["x5"]["tools_json"]  # scrubbed as the request was
    assert by_id["x2"]["tools_json"] == "null" and by_id["x4"]["tools_json"] == "[]"


def test_the_stream_stage_reads_tools_json_and_gets_the_tools_the_request_holds(tmp_path):
    out = tmp_path / "run"
    ingest(_capture(tmp_path), out)
    path = out / "exchanges.parquet"
    n = pq.ParquetFile(path).metadata.num_rows
    batch = read_batch(path, BatchRef(0, 0, 0, n), STREAM_COLUMNS)
    assert "request_json" not in batch.schema.names  # no request body read when every row has its tools text
    rows = exchange_rows(batch)
    full = pq.read_table(path).to_pylist()
    for ex, r in zip(rows, full):
        want = openai_tools(r["route"], orjson.loads(r["request_json"]).get("tools"))
        assert exchange_tools(ex) == want, r["exchange_id"]
    assert rows[8]["route"] == "messages" and exchange_tools(rows[8])[0]["function"]["parameters"] == ANTHROPIC_TOOL["input_schema"]
    assert exchange_tools(rows[0]) is exchange_tools(rows[1])  # one decoding per distinct list


def test_a_run_folder_without_tools_json_or_with_a_null_decodes_the_requests(tmp_path):
    out = tmp_path / "run"
    ingest(_capture(tmp_path), out)
    path = out / "exchanges.parquet"
    table = pq.read_table(path)
    want = [openai_tools(r["route"], orjson.loads(r["request_json"]).get("tools")) for r in table.to_pylist()]
    n = table.num_rows
    old = tmp_path / "old.parquet"  # as written before the column existed
    pq.write_table(table.drop_columns(["tools_json"]), old)
    batch = read_batch(old, BatchRef(0, 0, 0, n), STREAM_COLUMNS)
    assert "request_json" in batch.schema.names and "tools_json" not in batch.schema.names
    assert [exchange_tools(ex) for ex in exchange_rows(batch)] == want
    holed = tmp_path / "holed.parquet"  # a null: not known, so that row's request is decoded
    col = table.column("tools_json").to_pylist()
    col[5] = None
    import pyarrow as pa

    pq.write_table(table.set_column(table.schema.get_field_index("tools_json"), "tools_json", pa.array(col, pa.string())), holed)
    batch = read_batch(holed, BatchRef(0, 0, 0, n), STREAM_COLUMNS)
    assert "request_json" in batch.schema.names
    assert [exchange_tools(ex) for ex in exchange_rows(batch)] == want
