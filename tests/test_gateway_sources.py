"""Capture sources with no Python writer, read from files written to their upstream source (issue 21).

``tests/data/captures/<source>/`` holds what ``tests/writers/gateway_writer.py`` wrote from the bytes
that crossed the wire between the ``openai`` SDK and the fake server, in the shape the upstream
code named there writes (Kong's file log, Helicone's export), and ``expected.jsonl``: what the
server received and sent. Each exchange is compared with it field by field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.capture.detect import classify_record, detect_file
from tests.test_otel_sources import CAPTURES, answer_of, expected, message_facts, run

#: source -> (file, skipped reasons, what it keeps: "exact" request, "chunks")
SOURCES = {
    "kong": ("file.log", {"kong: log entry with no 'ai' object (a route without an AI plugin)": 1,
                          "kong: AI log entry with no ai.<plugin>.payload (logging.log_payloads off)": 1}, {"exact", "chunks"}),
    "helicone": ("output.jsonl", {}, {"exact"}),
}


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_fixture_reads_as_the_server_saw_it(source: str, tmp_path: Path) -> None:
    name, skipped_by, keeps = SOURCES[source]
    path = CAPTURES / source / name
    assert detect_file(path) == source
    stats, rows, errors = run([path], tmp_path / "run")
    exp = expected(source)
    assert errors == []
    assert stats.formats == {source: 1}
    assert (stats.exchanges, stats.skipped_by) == (4, skipped_by)
    assert len(rows) == 4
    for row, e in zip(sorted(rows, key=lambda r: r["source_line"]), exp):
        req = json.loads(row["request_json"])
        assert req == e["request"]  # the body as sent, tools and stream flag included
        assert [message_facts(m) for m in req["messages"]] == [message_facts(m) for m in e["request"]["messages"]]
        assert row["stream"] is bool(e["request"].get("stream"))
        assert "exact_request" not in row["capture_lacks"] and "raw_completion" in row["capture_lacks"]
        content, calls, finish = answer_of(e)
        got_calls = [(c["id"], c["name"], json.loads(c["arguments"])) for c in row["served_tool_calls"] or []]
        streamed = e["stream"] is not None
        if streamed and "chunks" not in keeps:
            finish = None  # Helicone's consolidated stream keeps no finish_reason
        assert (row["served_content"] or None, got_calls, row["served_finish_reason"]) == (content, calls, finish)
        if streamed:
            assert row["served_chunks"] == (len(e["stream"]) if "chunks" in keeps else None)
            assert ("stream" in row["capture_lacks"]) is ("chunks" not in keeps)
        assert row["served_non_json_calls"] == 0


def _lines(source: str) -> list[str]:
    return (CAPTURES / source / SOURCES[source][0]).read_text().splitlines()


def test_kong_entry_is_not_taken_for_v1() -> None:
    """A Kong entry has ``request`` and ``route`` (Kong's route object): it was sniffed as v1 and
    refused with ``route must be one of ...; got {'name': 'chat'}``."""
    entry = json.loads(_lines("kong")[0])
    assert entry["route"]["name"] == "chat" and "request" in entry
    assert classify_record(entry) == "kong"


def test_helicone_json_array_export_reads_item_by_item(tmp_path: Path) -> None:
    """``--format json`` writes one ``[...]`` document, records pretty-printed."""
    items = [json.loads(ln) for ln in _lines("helicone")]
    src = tmp_path / "output.json"
    src.write_text("[\n" + ",\n".join(json.dumps(i, indent=2) for i in items) + "\n]\n")
    assert detect_file(src) == "helicone"
    stats, rows, errors = run([src], tmp_path / "run")
    assert (stats.exchanges, errors) == (4, [])
    assert sorted(r["source_line"] for r in rows) == [1, 2, 3, 4]


BAD = [
    ("kong", 0, lambda o: o["ai"]["proxy"]["payload"].update(request='{"model": "gpt-4o-mini", "messa'), "bad-json",
     "kong: ai.proxy.payload.request is not JSON"),
    ("kong", 0, lambda o: o["ai"]["proxy"]["payload"].update(response="[1, 2]"), "bad-field",
     "kong: ai.proxy.payload.response must be a JSON object, got list"),
    ("helicone", 0, lambda o: o.update(request_body=["not", "a", "body"]), "request-not-object",
     "helicone: request_body is a list, not an object"),
    ("helicone", 2, lambda o: o["response_body"]["choices"][0].update(message="hi"), "bad-field",
     "helicone: response_body.choices[0].message must be an object, got str"),
]


@pytest.mark.parametrize("source,index,mutate,reason,words", BAD, ids=[f"{b[0]}-{b[3]}-{i}" for i, b in enumerate(BAD)])
def test_wrong_shape_record_is_an_error_row_naming_the_field(tmp_path: Path, source, index, mutate, reason, words) -> None:
    lines = _lines(source)
    obj = json.loads(lines[index])
    mutate(obj)
    lines[index] = json.dumps(obj)
    src = tmp_path / SOURCES[source][0]
    src.write_text("\n".join(lines) + "\n")
    stats, rows, errors = run([src], tmp_path / "run")
    assert (stats.exchanges, stats.errors) == (3, 1)
    [err] = errors
    assert (err["source_line"], err["reason"]) == (index + 1, reason)
    assert words in err["detail"]


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_truncated_file_is_one_error_at_its_last_line(tmp_path: Path, source: str) -> None:
    data = (CAPTURES / source / SOURCES[source][0]).read_bytes()
    n = len(data.splitlines())
    src = tmp_path / SOURCES[source][0]
    src.write_bytes(data[: len(data) - len(data.splitlines()[-2]) // 2 - len(data.splitlines()[-1]) - 2])
    stats, rows, errors = run([src], tmp_path / "run")
    [err] = errors
    assert (err["source_line"], err["reason"]) == (n - 1, "bad-json")


@pytest.mark.parametrize("fmt,words", [
    ("kong", "kong: not a Kong log entry: expected 'ai' with ai.<plugin>.payload and the serializer keys (started_at, request, response, route); found: request, route"),
    ("helicone", "helicone: not a Helicone export record: expected request_id and one of request_body, response_body, request_path, "
                 "response_status, request_created_at; found: request, route"),
])
def test_forced_format_that_does_not_fit_names_keys_expected_and_found(tmp_path: Path, fmt: str, words: str) -> None:
    from replay.capture import ingest
    import pyarrow.parquet as pq

    src = tmp_path / "v1.jsonl"
    src.write_text(json.dumps({"request": {"model": "m", "messages": []}, "route": "chat.completions"}) + "\n")
    ingest([src], tmp_path / "run", capture_format=fmt)
    [err] = pq.read_table(tmp_path / "run" / "ingest_errors.parquet").to_pylist()
    assert (err["source_line"], err["reason"], err["detail"]) == (1, "bad-field", words)
