"""``replay.runner.driver.read_slices`` / ``run_ref``: a stage batch decoded from its row group a slice at
a time gives the slices of :data:`SLICE_ROWS` rows cut from ``read_batch``'s whole batch (the same columns,
values and order), and a stage run on them writes the same tables. Checked on row groups cut into
several batches (starts inside a row group), slices that do not divide a batch, a file without
``tools_json`` and one with a null there (``request_json`` then read too)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from replay.capture.ingest import ingest
from replay.stages.stage import RENDER, STREAM
from replay.stages.stream import STREAM_COLUMNS
from replay.runner.driver import BatchRef, batch_refs, read_batch, read_slices, run_ref
from replay.runspec import RunSpec

TOOL = {"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                         "parameters": {"type": "object", "properties": {"path": {"type": "string", "default": None}}}}}


def _capture(tmp_path, n: int = 23):
    lines = []
    for i in range(n):
        tools = [TOOL] if i % 4 else None
        request = {"messages": [{"role": "user", "content": f"read file {i}"}], **({"tools": tools} if tools else {})}
        out = f'<tool_call>\n{{"name": "read_file", "arguments": {{"path": "f{i}.txt"}}}}\n</tool_call>' if i % 3 else f"plain answer {i}"
        lines.append(json.dumps({"id": f"x{i:03d}", "route": "chat.completions", "model": "Qwen/Qwen3-8B", "request": request,
                                 "server": {"output_text": out, "steps": [out[j:j + 5] for j in range(0, len(out), 5)]}}))
    path = tmp_path / "cap.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def run(tmp_path):
    out = tmp_path / "run"
    ingest(_capture(tmp_path), out, batch_rows=10)  # row groups of 10, 10, 3
    return out


def _sliced(path, ref, columns, rows):
    whole = read_batch(path, ref, columns)
    return [whole.slice(i, rows) for i in range(0, whole.num_rows, rows)]


@pytest.mark.parametrize("batch_rows,rows", [(10, 3), (4, 3), (3, 3), (7, 2), (10, 64)])
def test_slices_are_the_slices_of_the_whole_batch(run, batch_rows, rows):
    path = run / "exchanges.parquet"
    refs = batch_refs(path, batch_rows)
    assert any(r.start for r in refs) or batch_rows >= 10
    for columns in (STREAM_COLUMNS, ["exchange_id", "request_json", "model"]):
        for ref in refs:
            got = list(read_slices(path, ref, columns, rows))
            want = _sliced(path, ref, columns, rows)
            assert [b.num_rows for b in got] == [b.num_rows for b in want], ref
            for g, w in zip(got, want):
                assert g.schema.names == w.schema.names
                assert g.to_pylist() == w.to_pylist(), ref


def test_without_tools_json_or_with_a_null_the_requests_are_read(run, tmp_path):
    table = pq.read_table(run / "exchanges.parquet")
    old = tmp_path / "old.parquet"
    pq.write_table(table.drop_columns(["tools_json"]), old, row_group_size=10)
    col = table.column("tools_json").to_pylist()
    col[12] = None  # in the second row group only
    holed = tmp_path / "holed.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("tools_json"), "tools_json", pa.array(col, pa.string())), holed,
                   row_group_size=10)
    nostats = tmp_path / "nostats.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("tools_json"), "tools_json", pa.array(col, pa.string())), nostats,
                   row_group_size=10, write_statistics=False)
    for path, with_request in ((old, [True, True, True]), (holed, [False, True, False]), (nostats, [False, True, False])):
        for ref, want_request in zip(batch_refs(path, 10), with_request):
            got = list(read_slices(path, ref, STREAM_COLUMNS, 4))
            assert all(("request_json" in b.schema.names) == want_request for b in got), (path.name, ref)
            assert [r for b in got for r in b.to_pylist()] == read_batch(path, ref, STREAM_COLUMNS).to_pylist()


@pytest.mark.parametrize("stage", [RENDER, STREAM], ids=lambda s: s.name)
def test_a_stage_on_slices_writes_the_tables_of_the_whole_batch(run, stage, monkeypatch):
    import replay.runner.driver as driver

    monkeypatch.setattr(driver, "SLICE_ROWS", 3)
    path = run / "exchanges.parquet"
    spec = RunSpec(batch_rows=7)
    for ref in batch_refs(path, 7):
        got = run_ref(stage, path, ref, spec)
        want = stage.function(read_batch(path, ref, stage.columns), spec)  # one call on the whole batch
        for table in stage.tables:
            assert got[table].num_rows == want[table].num_rows
            assert got[table].to_pylist() == want[table].to_pylist(), (stage.name, table, ref)


def test_a_reference_inside_a_row_group_reads_only_its_rows(run):
    path = run / "exchanges.parquet"
    ids = pq.read_table(path, columns=["exchange_id"]).column(0).to_pylist()
    got = [x for b in read_slices(path, BatchRef(0, 1, 3, 5), ["exchange_id"], 2) for x in b.column(0).to_pylist()]
    assert got == ids[13:18]
