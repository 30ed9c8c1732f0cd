"""Capture ingest (replay/capture/): discovery, decompression, v1 lines, Parquet tables, accounting."""

from __future__ import annotations

import gzip
import os
from datetime import datetime, timezone
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
import zstandard

from replay.runner.ingest import ingest as runner_ingest  # the --jobs pool is the runner's
from replay.capture import IngestStats, discover, ingest
from replay.capture.files import CorruptStream, TruncatedStream, open_lines
from replay.capture.v1 import CaptureError, parse_line
from replay.tables import EXCHANGES, INGEST_ERRORS, TOOLS

TOOL = {
    "type": "function",
    "function": {
        "name": "read",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "default": None}}},
    },
}
TOOL2 = {"type": "function", "function": {"name": "ls", "strict": None}}

EX_RESPONSE = {
    "id": "ex-1",
    "ts": "2025-01-01T00:00:00Z",
    "route": "chat.completions",
    "model": "m1",
    "request": {
        "model": "m1",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [TOOL, TOOL2],
    },
    "response": {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a"}'}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    },
    "server": {
        "prompt": "<s>hi",
        "prompt_token_ids": [1, 2],
        "output_text": "<tool>read</tool>",
        "output_token_ids": [7, 8, 9],
    },
}


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def tc(index: int, *, id: str | None = None, name: str | None = None, args: str | None = None) -> dict:
    fn: dict = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    out: dict = {"index": index, "function": fn}
    if id is not None:
        out["id"] = id
        out["type"] = "function"
    return out


# two calls, arguments split over chunks, the second call's arguments end in the last chunk
STREAM = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Let me "}),
    chunk({"content": "look."}),
    chunk({"tool_calls": [tc(0, id="call_a", name="read", args="")]}),
    chunk({"tool_calls": [tc(0, args='{"pa')]}),
    orjson.dumps(chunk({"tool_calls": [tc(0, args='th": "a.txt"}')]})).decode(),  # a string holding JSON
    chunk({"tool_calls": [tc(1, id="call_b", name="ls", args='{"dir"')]}),
    chunk({"tool_calls": [tc(1, name="ls_again", args=': "/tmp"}')]}, finish="tool_calls"),
    {"object": "chat.completion.chunk", "choices": [], "usage": {"total_tokens": 5}},
    "[DONE]",
]

EX_STREAM = {
    "id": 42,
    "ts": 1700000000,
    "route": "chat.completions",
    "request": {"model": "m2", "stream": True, "messages": [{"role": "user", "content": "x"}], "tools": [TOOL]},
    "stream": STREAM,
    "server": {"steps": ["Let me ", "look.", "<tool>"]},
}

EXPECTED_STREAM_CALLS = [
    {"index": 0, "id": "call_a", "name": "read", "arguments": '{"path": "a.txt"}'},
    {"index": 1, "id": "call_b", "name": "lsls_again", "arguments": '{"dir": "/tmp"}'},  # the SDK concatenates a repeated name
]


def jl(*records) -> bytes:
    return b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\n" for r in records)


def read(out: Path, name: str) -> list[dict]:
    return pq.read_table(out / f"{name}.parquet").to_pylist()


def check_accounting(stats: IngestStats, out: Path) -> None:
    assert stats.lines - stats.blank_lines == stats.exchanges + stats.errors
    assert stats.exchanges == len(read(out, "exchanges"))
    assert stats.errors == len(read(out, "ingest_errors"))
    assert stats.tools == len(read(out, "tools"))
    assert sum(stats.errors_by_reason.values()) == stats.errors


def expected_rows(source: str) -> list[dict]:
    return [
        {
            "exchange_id": "ex-1",
            "source_file": source,
            "source_line": 1,
            "ts": datetime(2025, 1, 1, tzinfo=timezone.utc),
            "route": "chat.completions",
            "model": "m1",
            "stream": False,
            "request_json": orjson.dumps(EX_RESPONSE["request"]).decode(),
            "n_messages": 1,
            "n_tools": 2,
            "served_content": None,
            "served_tool_calls": [{"index": 0, "id": "c1", "name": "read", "arguments": '{"path": "a"}'}],
            "served_finish_reason": "tool_calls",
            "served_chunks": None,
            "server_prompt": "<s>hi",
            "server_prompt_token_ids": [1, 2],
            "server_output_text": "<tool>read</tool>",
            "server_output_token_ids": [7, 8, 9],
            "server_steps": None,
            "capture_format": "v1",
            "capture_lacks": None,
            # served checks on a response body: no fragments, so no name or index checks
            "served_non_json_calls": 0,
            "served_name_repeats": None,
            "served_index_faults": None,
            "served_markup": None,
            "served_stop_with_calls": False,
            "served_id_faults": 0,
            "served_client_error": None,
            "tools_json": orjson.dumps(EX_RESPONSE["request"]["tools"]).decode(),
        },
        {
            "exchange_id": "42",
            "source_file": source,
            "source_line": 3,  # line 2 is blank
            "ts": datetime.fromtimestamp(1700000000, tz=timezone.utc),
            "route": "chat.completions",
            "model": "m2",
            "stream": True,
            "request_json": orjson.dumps(EX_STREAM["request"]).decode(),
            "n_messages": 1,
            "n_tools": 1,
            "served_content": "Let me look.",
            "served_tool_calls": EXPECTED_STREAM_CALLS,
            "served_finish_reason": "tool_calls",
            "served_chunks": 9,
            "server_prompt": None,
            "server_prompt_token_ids": None,
            "server_output_text": None,
            "server_output_token_ids": None,
            "server_steps": ["Let me ", "look.", "<tool>"],
            "capture_format": "v1",
            "capture_lacks": None,
            # a v1 line with an embedded stream gets the served checks: index 1 is named twice
            "served_non_json_calls": 0,
            "served_name_repeats": 1,
            "served_index_faults": 0,
            "served_markup": None,
            "served_stop_with_calls": False,
            "served_id_faults": 0,
            "served_client_error": None,
            "tools_json": orjson.dumps(EX_STREAM["request"]["tools"]).decode(),
        },
    ]


def expected_tools() -> list[dict]:
    return [
        {
            "exchange_id": "ex-1",
            "tool_index": 0,
            "type": "function",
            "name": "read",
            "has_description": True,
            "has_parameters": True,
            "has_strict": False,
            "strict": None,
            "client_null_paths": ["$.function.parameters.properties.path.default"],
            "tool_json": orjson.dumps(TOOL).decode(),
        },
        {
            "exchange_id": "ex-1",
            "tool_index": 1,
            "type": "function",
            "name": "ls",
            "has_description": False,
            "has_parameters": False,
            "has_strict": True,
            "strict": None,
            "client_null_paths": ["$.function.strict"],
            "tool_json": orjson.dumps(TOOL2).decode(),
        },
        {
            "exchange_id": "42",
            "tool_index": 0,
            "type": "function",
            "name": "read",
            "has_description": True,
            "has_parameters": True,
            "has_strict": False,
            "strict": None,
            "client_null_paths": ["$.function.parameters.properties.path.default"],
            "tool_json": orjson.dumps(TOOL).decode(),
        },
    ]


GOOD = jl(EX_RESPONSE, b"   ", EX_STREAM)


@pytest.mark.parametrize(
    "name, encode",
    [
        ("cap.jsonl", lambda b: b),
        ("cap.jsonl.zst", lambda b: zstandard.ZstdCompressor().compress(b)),
        ("cap.jsonl.gz", gzip.compress),
        ("misnamed.jsonl", lambda b: zstandard.ZstdCompressor().compress(b)),  # zstd under a plain name
        ("misnamed.jsonl.zst", gzip.compress),  # gzip under a zstd name
    ],
)
def test_ingest_exact_rows(tmp_path: Path, name: str, encode) -> None:
    src = tmp_path / name
    src.write_bytes(encode(GOOD))
    out = tmp_path / "run"
    seen: list[int] = []
    stats = ingest([src], out, progress=seen.append)
    assert read(out, "exchanges") == expected_rows(str(src))
    assert read(out, "tools") == expected_tools()
    assert read(out, "ingest_errors") == []
    assert (stats.files, stats.lines, stats.blank_lines, stats.exchanges, stats.errors, stats.tools) == (1, 3, 1, 2, 0, 3)
    assert stats.bytes_read == sum(seen) == src.stat().st_size
    assert stats.errors_by_reason == {}
    assert str(stats) == "3 lines: 2 exchanges, 0 errors"
    check_accounting(stats, out)
    for table, schema in (("exchanges", EXCHANGES), ("tools", TOOLS), ("ingest_errors", INGEST_ERRORS)):
        assert pq.read_schema(out / f"{table}.parquet").remove_metadata() == schema


def test_bad_lines_each_give_an_error_row(tmp_path: Path) -> None:
    lines = [
        b'{"id": "a", "route": "chat.completions", "request": {',  # 1 malformed JSON
        b"[1, 2]",  # 2 not an object
        b'{"id": "b", "route": "chat.completions"}',  # 3 missing request
        b'{"route": "chat.completions", "request": "hi"}',  # 4 request not an object
        b'{"route": "chat.completions", "request": {"tools": {"name": "x"}}}',  # 5 tools not a list
        b"",  # 6 blank
        b'{"route": "chat.completions", "request": {"tools": [3]}}',  # 7 tool not an object
        b'{"route": "chat.completions", "request": {"m": "caf\xe9"}}',  # 8 latin-1 byte: not UTF-8
        b'{"route": "completions", "request": {}}',  # 9 bad route
        b'{"route": "messages", "request": {}, "server": {"steps": ["a", 1]}}',  # 10 bad steps
        b'{"route": "messages", "request": {}, "server": {"prompt_token_ids": [1, 4294967296]}}',  # 11 > int32
        b'{"route": "messages", "request": {}, "stream": ["not json"]}',  # 12 bad stream payload
        b'{"route": "messages", "request": {}}',  # 13 fine: exchange "<file>:13"
        b"NaN",  # 14 not JSON per RFC 8259
    ]
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "run"
    stats = ingest(src, out)
    errors = read(out, "ingest_errors")
    got = [(e["source_file"], e["source_line"], e["reason"]) for e in errors]
    f = str(src)
    assert got == [
        (f, 1, "bad-json"),
        (f, 2, "not-object"),
        (f, 3, "missing-request"),
        (f, 4, "request-not-object"),
        (f, 5, "tools-not-list"),
        (f, 7, "tool-not-object"),
        (f, 8, "not-utf8"),
        (f, 9, "bad-field"),
        (f, 10, "bad-field"),
        (f, 11, "bad-field"),
        (f, 12, "bad-field"),
        (f, 14, "bad-json"),
    ]
    offsets = [sum(len(x) + 1 for x in lines[: i - 1]) for _, i, _ in got]
    assert [e["byte_offset"] for e in errors] == offsets
    assert errors[0]["excerpt"] == lines[0].decode()
    assert errors[6]["excerpt"] == '{"route": "chat.completions", "request": {"m": "caf\ufffd"}}'
    assert all(e["detail"] for e in errors)
    ex = read(out, "exchanges")
    assert [(r["exchange_id"], r["source_line"], r["route"]) for r in ex] == [(f"{f}:13", 13, "messages")]
    assert (stats.lines, stats.blank_lines, stats.exchanges, stats.errors) == (14, 1, 1, 12)
    assert stats.errors_by_reason == {
        "bad-field": 4,
        "bad-json": 2,
        "missing-request": 1,
        "not-object": 1,
        "not-utf8": 1,
        "request-not-object": 1,
        "tool-not-object": 1,
        "tools-not-list": 1,
    }
    check_accounting(stats, out)


def test_excerpt_is_at_most_120_chars(tmp_path: Path) -> None:
    src = tmp_path / "long-bad.jsonl"
    src.write_bytes(b'{"x": "' + "é".encode() * 1000 + b"\n")
    out = tmp_path / "run"
    ingest(src, out)
    (err,) = read(out, "ingest_errors")
    assert err["reason"] == "bad-json" and err["excerpt"] == '{"x": "' + "é" * 113


def many_lines(n: int) -> list[bytes]:
    return [
        orjson.dumps({"id": f"r{i}", "route": "chat.completions", "request": {"messages": [], "pad": "x" * (i % 97)}})
        for i in range(n)
    ]


def test_truncated_zst(tmp_path: Path) -> None:
    lines = many_lines(20000)
    data = b"".join(x + b"\n" for x in lines)
    comp = zstandard.ZstdCompressor(level=1).compress(data)
    src = tmp_path / "cut.jsonl.zst"
    src.write_bytes(comp[:-7])  # cut the end of the (only) frame
    # the reader yields the complete lines decoded before the cut, then raises
    got = []
    with pytest.raises(TruncatedStream) as fault:
        for line_no, offset, raw in open_lines(src):
            got.append((line_no, offset, raw))
    n = len(got)
    assert 0 < n < len(lines)
    assert [g[2] for g in got] == lines[:n]
    assert fault.value.line_no == n + 1
    assert fault.value.byte_offset == sum(len(x) + 1 for x in lines[:n])
    assert lines[n].startswith(fault.value.partial)

    out = tmp_path / "run"
    stats = ingest(src, out)
    errors = read(out, "ingest_errors")
    assert [(e["source_file"], e["source_line"], e["reason"]) for e in errors] == [(str(src), n + 1, "truncated-stream")]
    assert errors[0]["byte_offset"] == fault.value.byte_offset
    assert [r["exchange_id"] for r in read(out, "exchanges")] == [f"r{i}" for i in range(n)]
    # accounting: the fault row stands for the line at which reading stopped, and counts as one line
    assert (stats.lines, stats.exchanges, stats.errors) == (n + 1, n, 1)
    assert stats.errors_by_reason == {"truncated-stream": 1}
    check_accounting(stats, out)


def test_truncated_zst_second_frame(tmp_path: Path) -> None:
    c = zstandard.ZstdCompressor()
    a, b = many_lines(2)
    src = tmp_path / "frames.jsonl.zst"
    src.write_bytes(c.compress(a + b"\n") + c.compress(b + b"\n")[:-3])
    out = tmp_path / "run"
    stats = ingest(src, out)
    assert [r["exchange_id"] for r in read(out, "exchanges")] == ["r0"]
    assert [(e["source_line"], e["reason"]) for e in read(out, "ingest_errors")] == [(2, "truncated-stream")]
    check_accounting(stats, out)


def test_multi_frame_zst_and_multi_member_gz(tmp_path: Path) -> None:
    lines = many_lines(3)
    c = zstandard.ZstdCompressor()
    (tmp_path / "a.jsonl.zst").write_bytes(c.compress(lines[0] + b"\n" + lines[1][:10]) + c.compress(lines[1][10:] + b"\n" + lines[2]))
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(lines[0] + b"\n") + gzip.compress(lines[1] + b"\n" + lines[2] + b"\n") + b"\0\0\0")
    for name in ("a.jsonl.zst", "b.jsonl.gz"):
        assert [raw for _, _, raw in open_lines(tmp_path / name)] == lines


def test_truncated_gz(tmp_path: Path) -> None:
    lines = many_lines(20000)
    comp = gzip.compress(b"".join(x + b"\n" for x in lines))
    src = tmp_path / "cut.jsonl.gz"
    src.write_bytes(comp[: len(comp) // 2])
    out = tmp_path / "run"
    stats = ingest(src, out)
    ex = read(out, "exchanges")
    n = len(ex)
    assert 0 < n < len(lines)
    assert [r["exchange_id"] for r in ex] == [f"r{i}" for i in range(n)]
    errors = read(out, "ingest_errors")
    assert [(e["source_line"], e["reason"]) for e in errors] == [(n + 1, "truncated-stream")]
    assert (stats.lines, stats.exchanges, stats.errors) == (n + 1, n, 1)
    check_accounting(stats, out)


def test_corrupt_gz_and_zst(tmp_path: Path) -> None:
    lines = many_lines(5000)
    data = b"".join(x + b"\n" for x in lines)
    gz = bytearray(gzip.compress(data))
    gz[len(gz) // 2 : len(gz) // 2 + 64] = b"\xff" * 64
    zs = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(data))
    zs[len(zs) // 2 : len(zs) // 2 + 64] = b"\x00" * 64
    (tmp_path / "c.jsonl.gz").write_bytes(bytes(gz))
    (tmp_path / "c.jsonl.zst").write_bytes(bytes(zs))
    (tmp_path / "g.jsonl.gz").write_bytes(gzip.compress(data[:200]) + b"garbage")
    for name in ("c.jsonl.gz", "c.jsonl.zst", "g.jsonl.gz"):
        with pytest.raises(CorruptStream):
            for _ in open_lines(tmp_path / name):
                pass
    out = tmp_path / "run"
    stats = ingest(tmp_path, out)
    reasons = [(Path(e["source_file"]).name, e["reason"]) for e in read(out, "ingest_errors")]
    # a corrupt block may decode to garbage before the decoder notices (zstd and gzip check their checksums at
    # the end of the frame): such lines give their own rows (bad-json, not-utf8 ...) before the fault
    faults = [r for r in reasons if r[1] == "corrupt-stream"]
    assert faults == [("c.jsonl.gz", "corrupt-stream"), ("c.jsonl.zst", "corrupt-stream"), ("g.jsonl.gz", "corrupt-stream")]
    assert {r[0] for r in reasons if r[1] != "corrupt-stream"} <= {"c.jsonl.zst", "c.jsonl.gz"}
    assert stats.errors_by_reason["corrupt-stream"] == 3
    check_accounting(stats, out)


def test_empty_file_writes_empty_tables(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "empty.jsonl.gz").write_bytes(gzip.compress(b""))
    (tmp_path / "empty.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(b""))
    out = tmp_path / "run"
    stats = ingest(tmp_path, out)
    assert (stats.files, stats.lines, stats.exchanges, stats.errors, stats.tools) == (3, 0, 0, 0, 0)
    assert str(stats) == "0 lines: 0 exchanges, 0 errors"
    assert str(IngestStats(lines=1, exchanges=1)) == "1 line: 1 exchange, 0 errors"
    assert str(IngestStats(lines=12345, exchanges=12344, errors=1)) == "12,345 lines: 12,344 exchanges, 1 error"
    for table, schema in (("exchanges", EXCHANGES), ("tools", TOOLS), ("ingest_errors", INGEST_ERRORS)):
        t = pq.read_table(out / f"{table}.parquet")
        assert t.num_rows == 0 and t.schema.remove_metadata() == schema


def test_final_line_without_newline(tmp_path: Path) -> None:
    src = tmp_path / "nonl.jsonl"
    src.write_bytes(jl(EX_RESPONSE) + orjson.dumps({**EX_RESPONSE, "id": "last"}))
    assert [(n, o) for n, o, _ in open_lines(src)] == [(1, 0), (2, len(jl(EX_RESPONSE)))]
    out = tmp_path / "run"
    stats = ingest(src, out)
    assert [(r["exchange_id"], r["source_line"]) for r in read(out, "exchanges")] == [("ex-1", 1), ("last", 2)]
    assert (stats.lines, stats.exchanges, stats.errors) == (2, 2, 0)


def test_crlf_lines(tmp_path: Path) -> None:
    src = tmp_path / "crlf.jsonl"
    src.write_bytes(orjson.dumps(EX_RESPONSE) + b"\r\n\r\n" + orjson.dumps(EX_STREAM) + b"\r\n")
    out = tmp_path / "run"
    stats = ingest(src, out)
    assert (stats.lines, stats.blank_lines, stats.exchanges, stats.errors) == (3, 1, 2, 0)


@pytest.mark.parametrize("suffix", ["jsonl", "jsonl.zst"])
def test_5mb_line(tmp_path: Path, suffix: str) -> None:
    big = "y" * (5 * 1024 * 1024)
    rec = {"id": "big", "route": "chat.completions", "request": {"messages": [{"role": "user", "content": big}]}}
    data = jl(EX_RESPONSE, rec, EX_STREAM)
    src = tmp_path / f"big.{suffix}"
    src.write_bytes(data if suffix == "jsonl" else zstandard.ZstdCompressor().compress(data))
    # small blocks: the line spans many reads
    got = list(open_lines(src, block_size=4096))
    assert [len(raw) for _, _, raw in got] == [len(orjson.dumps(x)) for x in (EX_RESPONSE, rec, EX_STREAM)]
    out = tmp_path / "run"
    stats = ingest(src, out)
    ex = read(out, "exchanges")
    assert [r["exchange_id"] for r in ex] == ["ex-1", "big", "42"]
    assert orjson.loads(ex[1]["request_json"])["messages"][0]["content"] == big
    assert (stats.lines, stats.exchanges, stats.errors) == (3, 3, 0)


def test_stream_assembly_exact_calls() -> None:
    row, _ = parse_line(orjson.dumps(EX_STREAM), "f.jsonl", 1)
    assert row["served_tool_calls"] == EXPECTED_STREAM_CALLS
    assert (row["served_content"], row["served_finish_reason"], row["served_chunks"]) == ("Let me look.", "tool_calls", 9)


def test_stream_calls_interleaved_and_in_last_chunk() -> None:
    stream = [
        chunk({"tool_calls": [tc(0, id="a", name="f", args='{"x":'), tc(1, id="b", name="g", args="")]}),
        chunk({"tool_calls": [tc(1, args='{"y":')]}),
        chunk({"tool_calls": [tc(0, args=" 1}")]}),
        chunk({"tool_calls": [tc(1, args=" 2}")]}, finish="tool_calls"),  # the call ends in the last chunk
        chunk({}, finish=None),
    ]
    rec = {"route": "chat.completions", "request": {"stream": True}, "stream": stream}
    row, _ = parse_line(orjson.dumps(rec), "f.jsonl", 5)
    assert row["served_tool_calls"] == [
        {"index": 0, "id": "a", "name": "f", "arguments": '{"x": 1}'},
        {"index": 1, "id": "b", "name": "g", "arguments": '{"y": 2}'},
    ]
    assert row["served_content"] is None and row["served_finish_reason"] == "tool_calls"
    assert row["served_chunks"] == 5 and row["exchange_id"] == "f.jsonl:5"
    # no tool_calls in any chunk: None (not an empty list)
    row, _ = parse_line(orjson.dumps({**rec, "stream": [chunk({"content": "hi"}, "stop"), "[DONE]"]}), "f", 1)
    assert (row["served_content"], row["served_tool_calls"], row["served_finish_reason"], row["served_chunks"]) == (
        "hi",
        None,
        "stop",
        1,
    )


def test_messages_stream_assembly() -> None:
    events = [
        {"type": "message_start", "message": {"content": [], "stop_reason": None, "usage": {"output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "tu1", "name": "f", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"a"'}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ": 1}"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "tu2", "name": "g", "input": {}}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    rec = {"route": "messages", "request": {"messages": [{}, {}], "tools": [{"name": "f", "input_schema": {}}]}, "stream": events}
    row, tools = parse_line(orjson.dumps(rec), "f", 1)
    assert row["served_content"] == "Hello"
    assert row["served_tool_calls"] == [
        {"index": 0, "id": "tu1", "name": "f", "arguments": '{"a":1}'},  # the SDK's parsed input, as JSON text
        {"index": 1, "id": "tu2", "name": "g", "arguments": "{}"},
    ]
    assert (row["served_finish_reason"], row["served_chunks"], row["n_messages"]) == ("tool_use", 13, 2)
    assert (tools[0]["type"], tools[0]["name"], tools[0]["has_parameters"]) == (None, "f", True)
    # non-streaming Messages body
    resp = {"content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}], "stop_reason": "tool_use"}
    row, _ = parse_line(orjson.dumps({"route": "messages", "request": {}, "response": resp}), "f", 1)
    assert (row["served_content"], row["served_tool_calls"], row["served_finish_reason"]) == (
        "ok",
        [{"index": 0, "id": "t", "name": "f", "arguments": '{"a":1}'}],
        "tool_use",
    )


def test_responses_route() -> None:
    events = [
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"},
        {"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "call_id": "fc1", "name": "f", "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"q":'},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '"x"}'},
        {"type": "response.completed", "response": {"status": "completed"}},
    ]
    rec = {"route": "responses", "request": {"input": "hello", "tools": [{"type": "function", "name": "f", "parameters": {}}]}, "stream": events}
    row, tools = parse_line(orjson.dumps(rec), "f", 1)
    assert (row["served_content"], row["served_tool_calls"], row["served_finish_reason"], row["n_messages"]) == (
        "Hi",
        [{"index": 0, "id": "fc1", "name": "f", "arguments": '{"q":"x"}'}],
        "completed",
        1,
    )
    assert tools[0]["name"] == "f"
    resp = {"status": "completed", "output": [
        {"type": "message", "content": [{"type": "output_text", "text": "a"}]},
        {"type": "function_call", "call_id": "c", "name": "g", "arguments": "{}"},
    ]}
    row, _ = parse_line(orjson.dumps({"route": "responses", "request": {}, "response": resp}), "f", 1)
    assert (row["served_content"], row["served_tool_calls"]) == ("a", [{"index": 0, "id": "c", "name": "g", "arguments": "{}"}])


def test_parse_line_errors_and_ids() -> None:
    with pytest.raises(CaptureError) as err:
        parse_line(b"\xff{}", "f", 1)
    assert err.value.reason == "not-utf8"
    row, _ = parse_line(b'\xef\xbb\xbf{"route": "messages", "request": {}, "id": true}', "f", 9)
    assert row["exchange_id"] == "f:9"  # a bool id is not an id; the BOM is ignored
    row, _ = parse_line(b'{"route": "messages", "request": {"stream": "yes"}, "id": 1.5, "ts": 1.25}', "f", 9)
    assert (row["exchange_id"], row["ts"], row["stream"]) == ("1.5", datetime(1970, 1, 1, 0, 0, 1, 250000, tzinfo=timezone.utc), None)


def test_duplicate_ids_are_kept_distinct(tmp_path: Path) -> None:
    src = tmp_path / "dup.jsonl"
    src.write_bytes(jl(EX_RESPONSE, EX_RESPONSE, EX_RESPONSE))
    out = tmp_path / "run"
    stats = ingest(src, out)
    # every line is kept, and exchange_id stays a key: a repeated id gets "@<file>:<line>"
    assert [(r["exchange_id"], r["source_line"]) for r in read(out, "exchanges")] == [
        ("ex-1", 1),
        (f"ex-1@{src}:2", 2),
        (f"ex-1@{src}:3", 3),
    ]
    assert stats.duplicate_ids == 2
    tools = read(out, "tools")
    assert len(tools) == 6 and {t["exchange_id"] for t in tools} == {"ex-1", f"ex-1@{src}:2", f"ex-1@{src}:3"}


def test_small_batches_and_many_files(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(jl(*[{**EX_RESPONSE, "id": f"a{i}"} for i in range(7)]) + b"oops\n")
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(jl(*[{**EX_STREAM, "id": f"b{i}"} for i in range(5)])))
    out = tmp_path / "run"
    stats = ingest(tmp_path, out, batch_rows=2)
    assert [r["exchange_id"] for r in read(out, "exchanges")] == [f"a{i}" for i in range(7)] + [f"b{i}" for i in range(5)]
    assert pq.ParquetFile(out / "exchanges.parquet").metadata.num_row_groups > 1
    assert (stats.files, stats.lines, stats.exchanges, stats.errors, stats.tools) == (2, 13, 12, 1, 7 * 2 + 5)
    check_accounting(stats, out)


def test_discover(tmp_path: Path) -> None:
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / ".hidden").mkdir()
    for name in ("d/b.jsonl", "d/a.jsonl.zst", "d/sub/c.ndjson.gz", "d/sub/e.json", "d/.h.jsonl",
                 "d/.hidden/x.jsonl", "d/notes.txt", "d/f.JSONL", "odd.bin"):
        (tmp_path / name).write_bytes(b"")
    d = tmp_path / "d"
    assert discover(d) == [d / "a.jsonl.zst", d / "b.jsonl", d / "f.JSONL", d / "sub" / "c.ndjson.gz", d / "sub" / "e.json"]
    # a file named directly is taken whatever its name; duplicates removed
    assert discover([tmp_path / "odd.bin", d / "b.jsonl", str(d / "b.jsonl")]) == [d / "b.jsonl", tmp_path / "odd.bin"]
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        discover([d, tmp_path / "nope.jsonl"])
    with pytest.raises(FileNotFoundError):
        ingest(tmp_path / "nope.jsonl", tmp_path / "run")


def test_unexpected_faults_do_not_stop_the_run(tmp_path: Path, monkeypatch) -> None:
    import sys

    # `replay.capture.ingest` as an attribute is the re-exported function; the module is in sys.modules
    ing = sys.modules["replay.capture.ingest"]

    real = ing.parse_record

    def fake_parse(rec: dict, source_file: str, line_no: int, capture_format: str = "v1"):
        if line_no == 1:
            raise RuntimeError("parser bug")
        row, tools = real(rec, source_file, line_no, capture_format)
        if line_no == 2:
            row["n_tools"] = 2**40  # does not fit int32: caught when the batch is built
        return row, tools

    monkeypatch.setattr(ing, "parse_record", fake_parse)
    src = tmp_path / "x.jsonl"
    src.write_bytes(jl(*[{**EX_RESPONSE, "id": f"e{i}"} for i in range(4)]))
    out = tmp_path / "run"
    stats = ingest(src, out)
    assert [(e["source_line"], e["reason"]) for e in read(out, "ingest_errors")] == [(1, "internal-error"), (2, "bad-field")]
    assert [r["exchange_id"] for r in read(out, "exchanges")] == ["e2", "e3"]
    assert stats.tools == 4  # the rejected exchange's tool rows are dropped with it
    check_accounting(stats, out)


def test_decompression_output_is_bounded(tmp_path: Path) -> None:
    """1 KiB of zstd can expand to many MB: the reader must not materialize it in one piece."""
    from replay.capture.files import _Decoder

    data = (b"a" * 1000 + b"\n") * 100_000  # 100 MB, compresses ~10000:1
    comp = zstandard.ZstdCompressor().compress(data)
    dec = _Decoder("zstd")
    sizes = [len(piece) for piece in dec.feed(comp)]
    assert sum(sizes) == len(data) and dec.finished()
    assert max(sizes) <= 32 << 20
    gz = gzip.compress(data)
    dec = _Decoder("gzip")
    sizes = [len(piece) for piece in dec.feed(gz)]
    assert sum(sizes) == len(data) and max(sizes) <= 32 << 20


# --------------------------------------------------------------------------- shared tool lists, columnar batches

from hypothesis import given, settings
from hypothesis import strategies as st

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6).filter(lambda k: k != "tools"), _json_values, max_size=4),
       st.lists(st.dictionaries(st.text(max_size=5), _json_values, max_size=3), max_size=3), st.integers(0, 4))
def test_request_bytes_is_orjson_of_the_request_byte_for_byte(rest: dict, tools: list, at: int) -> None:
    from replay.capture.v1 import request_bytes

    items = list(rest.items())
    request = dict(items[:at] + [("tools", tools)] + items[at:])
    assert request_bytes(request, orjson.dumps(tools)) == orjson.dumps(request)
    assert request_bytes(rest, None) == orjson.dumps(rest)


def test_a_shared_tool_list_gives_each_exchange_its_own_rows_and_a_scrub_never_reaches_another(tmp_path: Path) -> None:
    """Exchanges sending the same tools share one described list (replay.capture.v1.ToolList): the
    tools table must still hold each exchange's rows, duplicate ids renamed, and a key inside a
    declaration is replaced in every exchange sending it, without changing another list."""
    key = "sk-proj-4f9Qx2LmN8pR7sT1vW3yZ5aB6cD0eF"
    leaky = {"type": "function", "function": {"name": "fetch", "description": f"uses {key}"}}
    recs = [
        {**EX_RESPONSE, "id": "a"},
        {**EX_RESPONSE, "id": "b", "request": {**EX_RESPONSE["request"], "tools": [TOOL2, TOOL]}},
        {**EX_RESPONSE, "id": "a"},  # a duplicate id: its tool rows take the renamed id
        {**EX_RESPONSE, "id": "c", "request": {**EX_RESPONSE["request"], "tools": [leaky, TOOL]}},
        {**EX_RESPONSE, "id": "d", "request": {**EX_RESPONSE["request"], "tools": [leaky, TOOL]}},
        {**EX_RESPONSE, "id": "e", "request": {**EX_RESPONSE["request"], "tools": [TOOL]}},
        {**EX_RESPONSE, "id": "f", "request": {k: v for k, v in EX_RESPONSE["request"].items() if k != "tools"}},
    ]
    src = tmp_path / "x.jsonl"
    src.write_bytes(jl(*recs))
    out = tmp_path / "run"
    stats = ingest(src, out, batch_rows=3)  # batches cut across the shared lists
    rows = read(out, "tools")
    got = [(r["exchange_id"], r["tool_index"], r["name"]) for r in rows]
    assert got == [("a", 0, "read"), ("a", 1, "ls"), ("b", 0, "ls"), ("b", 1, "read"), (f"a@{src}:3", 0, "read"),
                   (f"a@{src}:3", 1, "ls"), ("c", 0, "fetch"), ("c", 1, "read"), ("d", 0, "fetch"), ("d", 1, "read"), ("e", 0, "read")]
    by = {(r["exchange_id"], r["tool_index"]): r for r in rows}
    for xid in ("c", "d"):
        assert key not in by[(xid, 0)]["tool_json"] and "[redacted:sk]" in by[(xid, 0)]["tool_json"]
    assert by[("e", 0)]["tool_json"] == by[("a", 0)]["tool_json"] == orjson.dumps(TOOL).decode()
    for r in rows:  # every column as parse_line makes it (but the scrubbed declaration text)
        if r["exchange_id"] not in ("c", "d") or r["tool_index"]:
            want = {**parse_line(orjson.dumps(recs[0] if r["exchange_id"].startswith("a") else next(x for x in recs if x["id"] == r["exchange_id"])), "f", 1)[1][r["tool_index"]], "exchange_id": r["exchange_id"]}
            assert r == want
    ex = read(out, "exchanges")
    assert [e["n_tools"] for e in ex] == [2, 2, 2, 2, 2, 1, 0]
    assert all(key not in e["request_json"] for e in ex)
    assert pq.read_schema(out / "tools.parquet").equals(TOOLS) and pq.read_schema(out / "exchanges.parquet").equals(EXCHANGES)
    check_accounting(stats, out)


def _capture_folder(tmp_path: Path) -> Path:
    caps = tmp_path / "caps"
    caps.mkdir()
    recs = [{**EX_RESPONSE, "id": f"e{i % 7}", "model": f"m{i % 3}"} for i in range(40)]  # ids repeat within and across files
    (caps / "a.jsonl").write_bytes(jl(*recs[:20], b"{broken", b"", {"id": "no-request"}))
    (caps / "b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(jl(*recs[20:])))
    (caps / "c.jsonl.gz").write_bytes(gzip.compress(jl(*recs[5:15]))[:-9])  # truncated: a stream fault after some lines
    return caps


@pytest.mark.parametrize("filters", [None, {"models": ("m0", "m1"), "limit": 25}])
def test_jobs_2_writes_the_same_rows_as_jobs_1(tmp_path: Path, filters) -> None:
    """``ingest(jobs=2)`` parses the batches on a process pool: the tables, their order and the
    counts are those of ``jobs=1`` (duplicate ids renamed and ``limit`` applied in reading order)."""
    from replay.capture.filters import Filters
    from replay.runner.pool import close_pools

    caps = _capture_folder(tmp_path)
    f = Filters(**filters) if filters else None
    s1 = ingest(caps, tmp_path / "j1", batch_rows=4, filters=f)
    try:
        s2 = runner_ingest(caps, tmp_path / "j2", batch_rows=4, filters=f, jobs=2)
    finally:
        close_pools()
    assert s1 == s2
    for name in ("exchanges", "tools", "ingest_errors"):
        assert read(tmp_path / "j1", name) == read(tmp_path / "j2", name), name
    assert s1.duplicate_ids > 0 and s1.errors >= 3
    if filters:
        assert s1.exchanges == 25 and s1.filtered_by["limit"] > 0 and s1.filtered_by["model"] > 0
    if not filters:
        check_accounting(s1, tmp_path / "j1")
    assert not [p for p in (tmp_path / "j2").iterdir() if p.name.startswith(".tmp-")]


SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def _table_bytes(run: Path) -> dict[str, bytes]:
    return {name: (run / f"{name}.parquet").read_bytes() for name in ("exchanges", "tools", "ingest_errors")}


@pytest.mark.parametrize("item_bytes", [1, 600])
def test_jobs_2_cuts_batches_into_items_and_writes_the_same_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, item_bytes: int) -> None:
    """With ``jobs=2`` each batch is cut into items of about ``_POOL_ITEM_BYTES`` of lines (1: a
    line per item), parsed on the pool through /dev/shm files and joined again: the three tables
    are the very bytes ``jobs=1`` writes (rows, order, row groups, dictionaries), the stats equal,
    for v1 captures (plain, zstd, a truncated gzip, duplicate ids, bad lines) mixed with the other
    formats of ``samples/formats`` (parsed in the parent, in their turn), and no work file is left."""
    import sys

    from replay.runner.pool import close_pools

    monkeypatch.setattr(sys.modules["replay.runner.ingest"], "_POOL_ITEM_BYTES", item_bytes)
    caps = _capture_folder(tmp_path)
    paths = [caps, *sorted(p for p in (SAMPLES / "formats").iterdir() if p.is_file() and not p.name.endswith(".py")),
             SAMPLES / "malformed.jsonl", SAMPLES / "coding-agent.jsonl"]
    s1 = ingest(paths, tmp_path / "j1", batch_rows=8)
    before = set(Path("/dev/shm").iterdir()) if Path("/dev/shm").is_dir() else set()
    try:
        s2 = runner_ingest(paths, tmp_path / "j2", batch_rows=8, jobs=2)
    finally:
        close_pools()
    assert s1 == s2 and s1.exchanges > 40 and s1.errors > 5 and s1.duplicate_ids > 0 and len(s1.formats) > 3
    assert _table_bytes(tmp_path / "j1") == _table_bytes(tmp_path / "j2")
    assert pq.ParquetFile(tmp_path / "j2" / "exchanges.parquet").metadata.num_row_groups > 5
    left = (set(Path("/dev/shm").iterdir()) if Path("/dev/shm").is_dir() else set()) - before
    assert not [p for p in left if p.name.startswith(f"replay-ingest-{os.getpid()}-")]
    assert not [p for p in (tmp_path / "j2").iterdir() if p.name.startswith((".tmp-", "replay-ingest-"))]


def test_a_pool_process_that_dies_costs_its_items_records_not_the_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool function that kills its process (``os._exit``) on an item holding ``boom``: the
    item is run again alone, dies again, and its records become ``internal-error`` rows naming
    their file and line; every other item's rows are written as with ``jobs=1``; the ingest ends."""
    import sys

    from replay.runner.pool import PoolStats, close_pools

    (tmp_path / "ingest_killer.py").write_text(
        "import os\n"
        "from replay.runner.ingest import ingest_shared\n"
        "def killer(item, spec):\n"
        "    if any(b'boom' in e[3] for e in item.line_batch().entries if e[0] == 'line'):\n"
        "        os._exit(3)\n"
        "    return ingest_shared(item, spec)\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned pool processes import it too
    import ingest_killer

    mod = sys.modules["replay.runner.ingest"]
    monkeypatch.setattr(mod, "_POOL_FUNCTION", ingest_killer.killer)
    monkeypatch.setattr(mod, "_POOL_ITEM_BYTES", 1)
    recs = [{**EX_RESPONSE, "id": f"k{i}"} for i in range(6)]
    recs[3]["request"] = {**recs[3]["request"], "messages": [{"role": "user", "content": "boom"}]}
    cap = tmp_path / "cap.jsonl"
    cap.write_bytes(jl(*recs))
    stats = PoolStats()
    try:
        got = runner_ingest([cap], tmp_path / "j2", jobs=2, pool_stats=stats)
    finally:
        close_pools()
    assert (stats.restarts, stats.failed) == (1, 1) and stats.retried >= 1
    assert [e["exchange_id"] for e in read(tmp_path / "j2", "exchanges")] == ["k0", "k1", "k2", "k4", "k5"]
    errs = read(tmp_path / "j2", "ingest_errors")
    assert [(e["source_file"], e["source_line"], e["reason"]) for e in errs] == [(str(cap), 4, "internal-error")]
    assert errs[0]["detail"].startswith("WorkerError: the pool process died on this batch of 1 records, twice")
    assert (got.exchanges, got.errors, got.lines) == (5, 1, 6)
    check_accounting(got, tmp_path / "j2")


def test_parts_of_a_batch_join_as_the_batch() -> None:
    """:func:`_combine` of a batch's parts is the batch's result: exchanges and tools in order with
    one dictionary per column, the errors met while parsing in order and the schema rejects
    (``late_errors``, each part's last rows) after them, as one batch gives them; counts summed."""
    import pyarrow as pa

    from replay.capture.ingest import IngestSpec, LineBatch, ingest_batch
    from replay.runner.ingest import _combine

    lines = [orjson.dumps({**EX_RESPONSE, "id": f"x{i}"}) if i % 3 else b"[%d]" % i for i in range(9)]
    whole = ingest_batch(LineBatch("f", [("line", i + 1, i * 10, raw) for i, raw in enumerate(lines)]), IngestSpec())
    parts = [ingest_batch(LineBatch("f", [("line", i + 1, i * 10, lines[i]) for i in range(a, b)]), IngestSpec()) for a, b in ((0, 4), (4, 5), (5, 9))]
    got = _combine(parts)
    for name in ("exchanges", "tools", "ingest_errors"):
        assert got[name].to_pylist() == whole[name].to_pylist(), name
        assert got[name].schema == whole[name].schema
    assert got["exchanges"].column("tools_json").dictionary.to_pylist() == whole["exchanges"].column("tools_json").dictionary.to_pylist()
    assert got["tool_counts"] == whole["tool_counts"] and got["reasons"] == whole["reasons"] == {"not-object": 3}

    def err(line: int, reason: str) -> dict:
        return {"source_file": "f", "source_line": line, "byte_offset": 0, "reason": reason, "detail": "d", "excerpt": "e"}

    from replay.capture.columns import batch_from_rows
    from replay.tables import INGEST_ERRORS as ERRS

    a = {**parts[0], "ingest_errors": batch_from_rows([err(1, "not-json"), err(3, "bad-field")], ERRS), "late_errors": 1}
    b = {**parts[1], "ingest_errors": batch_from_rows([err(5, "not-json"), err(6, "bad-field"), err(7, "bad-field")], ERRS), "late_errors": 2}
    lines_of = [(e["source_line"], e["reason"]) for e in _combine([a, b])["ingest_errors"].to_pylist()]
    assert lines_of == [(1, "not-json"), (5, "not-json"), (3, "bad-field"), (6, "bad-field"), (7, "bad-field")]
    assert pa.concat_batches  # the join relies on it (pyarrow >= 19)


def test_ingest_batch_is_a_function_of_its_lines_and_spec() -> None:
    """The ingest stage as a batch function: entries (lines, readers' records, errors) + a plain
    spec -> Arrow tables, every entry an exchange or an error naming its file and line."""
    import pickle

    from replay.capture.ingest import IngestSpec, LineBatch, failed_batch, ingest_batch

    good = orjson.dumps({**EX_RESPONSE, "id": "x1"})
    batch = LineBatch("cap.jsonl", [("line", 1, 0, good), ("line", 2, 10, b"[1]"),
                                    ("record", 3, 20, b"", {**EX_RESPONSE, "id": "x3"}, "litellm", None),
                                    ("error", 4, 30, b"head", "line-too-long", "too long", "other.jsonl")])
    spec = IngestSpec(redact=False)
    batch, spec = pickle.loads(pickle.dumps((batch, spec)))  # what a pool process receives
    res = ingest_batch(batch, spec)
    ex = res["exchanges"].to_pylist()
    assert [(e["exchange_id"], e["source_line"], e["capture_format"]) for e in ex] == [("x1", 1, "v1"), ("x3", 3, "litellm")]
    assert ex[0]["request_json"] == orjson.dumps(EX_RESPONSE["request"]).decode()
    assert res["tool_counts"] == [2, 2] and res["tools"].num_rows == 4
    errs = res["ingest_errors"].to_pylist()
    assert [(e["source_file"], e["source_line"], e["reason"]) for e in errs] == [("cap.jsonl", 2, "not-object"), ("other.jsonl", 4, "line-too-long")]
    lost = failed_batch(batch, "pool process died")["ingest_errors"].to_pylist()
    assert [(e["source_file"], e["source_line"], e["reason"], e["detail"]) for e in lost] == [
        ("cap.jsonl", 1, "internal-error", "pool process died"), ("cap.jsonl", 2, "internal-error", "pool process died"),
        ("cap.jsonl", 3, "internal-error", "pool process died"), ("other.jsonl", 4, "internal-error", "pool process died")]


def test_cli_ingest_jobs(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from replay.cli import app

    caps = _capture_folder(tmp_path)
    got = CliRunner().invoke(app, ["ingest", str(caps), "--out", str(tmp_path / "run"), "--jobs", "2", "-q"])
    assert got.exit_code == 0, got.output
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["options"]["jobs"] == 2 and meta["ingest"]["exchanges"] == len(read(tmp_path / "run", "exchanges")) == 50  # 20 + 20 + the 10 lines before the cut
    got = CliRunner().invoke(app, ["ingest", str(caps), "--out", str(tmp_path / "small"), "-q"])
    assert got.exit_code == 0, got.output
    small = json.loads((tmp_path / "small" / "run.json").read_text())
    assert small["options"]["jobs"] == 1 and small["ingest"] == meta["ingest"]  # the default: no pool, the same counts


def test_tool_lists_sharing_a_fingerprint_stay_apart() -> None:
    """Two tool lists of the same length whose texts differ only in the middle (the cache's
    fingerprint: length, first and last bytes) are each described from their own declarations."""
    from replay.capture.v1 import _FP_BYTES, record_row

    def req(desc: str) -> dict:
        pad = "x" * _FP_BYTES
        tools = [{"type": "function", "function": {"name": "first", "description": pad}},
                 {"type": "function", "function": {"name": "mid", "description": desc}},
                 {"type": "function", "function": {"name": "last", "description": pad}}]
        return {"route": "chat.completions", "request": {"model": "m", "messages": [], "tools": tools}}

    a, b = req("alpha"), req("bravo")
    (_, ta), (_, tb), (_, ta2) = (record_row(r, "f", i) for i, r in enumerate((a, b, a)))
    assert ta.json != tb.json and len(ta.json) == len(tb.json) and ta.json[:_FP_BYTES] == tb.json[:_FP_BYTES]
    assert '"alpha"' in ta.cols[1]["tool_json"] and '"bravo"' in tb.cols[1]["tool_json"]
    assert ta2 is ta  # the cache still answers
