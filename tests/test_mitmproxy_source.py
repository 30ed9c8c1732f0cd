"""mitmproxy's own files, read from what mitmdump wrote in front of the fake server (issue 21).

``tests/data/captures/mitmproxy/`` (``tests/writers/mitm_writer.py``): ``flows.mitm`` (``mitmdump -w``,
tnetstring, read by replay's own reader: mitmproxy need not be installed) and ``flows.har``
(mitmproxy's ``SaveHar``), 4 exchanges and one ``GET /v1/models``; ``expected.jsonl``: what the server
received and sent. Each exchange is compared with it field by field: the request as sent, and
what was served (a streamed response as its chunks).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.capture.detect import detect_file
from replay.capture.mitm import TnetstringError, loads
from tests.test_otel_sources import CAPTURES, answer_of, expected, run

FOLDER = CAPTURES / "mitmproxy"


@pytest.mark.parametrize("name,fmt,skips", [
    ("flows.mitm", "mitmproxy", {"mitmproxy: GET /v1/models is not an LLM API call": 1}),
    ("flows.har", "har", {}),
])
def test_mitmproxy_files_read_as_the_server_saw_them(tmp_path: Path, name: str, fmt: str, skips: dict) -> None:
    path = FOLDER / name
    assert detect_file(path) == fmt
    stats, rows, errors = run([path], tmp_path / "run")
    assert errors == [] and stats.formats == {fmt: 1}
    assert (stats.lines, stats.exchanges, stats.skipped) == (5, 4, 1)
    if skips:
        assert stats.skipped_by == skips
    exp = expected("mitmproxy")
    for row, e in zip(sorted(rows, key=lambda r: r["source_line"]), exp):
        assert json.loads(row["request_json"]) == e["request"]  # the body as sent
        assert row["stream"] is bool(e["request"].get("stream"))
        content, calls, finish = answer_of(e)
        got = [(c["id"], c["name"], json.loads(c["arguments"])) for c in row["served_tool_calls"] or []]
        assert (row["served_content"] or None, got, row["served_finish_reason"]) == (content, calls, finish)
        assert row["served_chunks"] == (len(e["stream"]) if e["stream"] else None)  # the chunks, [DONE] not counted
        assert row["capture_lacks"] == ["raw_completion"]


def test_tnetstring_values() -> None:
    assert loads(b"0:~") is None
    assert loads(b"5:hello,") == b"hello"
    assert loads("6:Lisboa;".encode()) == "Lisboa"
    assert loads(b"2:42#") == 42 and loads(b"4:true!") is True and loads(b"3:2.5^") == 2.5
    assert loads(b"22:1:a;1:1#1:b;7:1:x,0:~]}") == {"a": 1, "b": [b"x", None]}
    for bad in (b"5:abc,", b"3:abc?", b"x:abc,", b"10:1:a;1:1#}"):
        with pytest.raises(TnetstringError):
            loads(bad)


def test_cut_dump_is_one_error_at_the_flow_it_stops_in(tmp_path: Path) -> None:
    data = (FOLDER / "flows.mitm").read_bytes()
    src = tmp_path / "flows.mitm"
    src.write_bytes(data[:8000])  # inside flow 3
    stats, rows, errors = run([src], tmp_path / "run")
    assert stats.exchanges == 2
    [err] = errors
    assert (err["source_line"], err["reason"]) == (3, "bad-tnetstring")
    assert err["detail"].startswith("mitmproxy dump (tnetstring): flow 3: the file ends inside a flow of ")


def test_request_body_not_json_is_an_error_naming_the_field(tmp_path: Path) -> None:
    data = (FOLDER / "flows.mitm").read_bytes()
    body = b'{"model":"gpt-4o-mini","messages":[{"role":"system"'
    i = data.index(body)
    # the same number of bytes, so that every length prefix still holds: a body that is not JSON
    bad = data[:i] + b'{"model":"gpt-4o-mini","messages":[{"role":' + b"?" * (len(body) - 43) + data[i + len(body):]
    src = tmp_path / "flows.mitm"
    src.write_bytes(bad)
    stats, rows, errors = run([src], tmp_path / "run")
    assert (stats.exchanges, stats.errors) == (3, 1)
    [err] = errors
    assert (err["source_line"], err["reason"]) == (1, "bad-json")
    assert err["detail"].startswith("mitmproxy request.content is not JSON")


def test_reads_as_mitmproxy_itself_reads_the_dump() -> None:
    """Where mitmproxy is installed (the writers extra), its own ``io.FlowReader`` sees the same flows."""
    io = pytest.importorskip("mitmproxy.io")
    from replay.capture.mitm import read_dump

    with open(FOLDER / "flows.mitm", "rb") as fh:
        theirs = [(f.id, f.request.method, f.request.path, f.request.content) for f in io.FlowReader(fh).stream()]
    ours = [(u.record or {}).get("id") for u in read_dump(FOLDER / "flows.mitm")]
    assert [t[0] for t in theirs][:4] == ours[:4]
