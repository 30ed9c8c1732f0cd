"""Langfuse observations, read from what langfuse-python's OpenAI integration logged (issue 21).

``tests/data/captures/langfuse/`` (``tests/writers/langfuse_writer.py``): the observations of the 4
exchanges, of an agent ``SPAN`` around the first two and of an embeddings call, as an API page
(``observations.json``) and as the bucket export (``export.jsonl``); ``expected.jsonl``: what the fake
server received and sent. Each exchange is compared with it field by field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.capture.detect import classify_record, detect_file
from tests.test_otel_sources import CAPTURES, answer_of, expected, message_facts, run

FOLDER = CAPTURES / "langfuse"
SKIPS = {"langfuse: observation type SPAN is not a model call": 1, "langfuse: observation type EMBEDDING is not a model call": 1}


@pytest.mark.parametrize("name,lines", [("observations.json", 1), ("export.jsonl", 6)])
def test_observations_read_as_the_server_saw_them(tmp_path: Path, name: str, lines: int) -> None:
    path = FOLDER / name
    assert detect_file(path) == "langfuse"
    stats, rows, errors = run([path], tmp_path / "run")
    assert errors == [] and stats.formats == {"langfuse": 1}
    assert (stats.lines - stats.shared_line_records, stats.lines, stats.exchanges, stats.skipped_by) == (lines, 6, 4, SKIPS)
    for row, e in zip(sorted(rows, key=lambda r: r["ts"]), expected("langfuse")):
        req = json.loads(row["request_json"])
        assert [message_facts(m) for m in req["messages"]] == [message_facts(m) for m in e["request"]["messages"]]
        assert req["tools"] == e["request"]["tools"] and "tools" not in row["capture_lacks"]
        assert row["model"] == e["request"]["model"]
        assert row["stream"] is bool(e["request"].get("stream"))  # completionStartTime: set for streams only
        content, calls, finish = answer_of(e)
        if e["stream"] is None:
            finish = None  # the integration logs finish_reason for streams only
        got = [(c["id"], c["name"], json.loads(c["arguments"])) for c in row["served_tool_calls"] or []]
        assert (row["served_content"] or None, got, row["served_finish_reason"]) == (content, calls, finish)
        assert row["capture_lacks"] == ["exact_request", "raw_completion", "stream"]


def _observations() -> list[dict]:
    return [json.loads(ln) for ln in (FOLDER / "export.jsonl").read_text().splitlines()]


def test_bare_message_list_input_is_a_request_without_tools() -> None:
    from replay.capture.langfuse import observation_record

    obs = next(o for o in _observations() if o["type"] == "GENERATION")
    assert classify_record(obs) == "langfuse"
    rec = observation_record({**obs, "input": obs["input"]["messages"]})
    assert "tools" not in rec["request"] and rec["request"]["messages"] == obs["input"]["messages"]


@pytest.mark.parametrize("field,value,words", [
    ("input", "Weather in Lisbon?", "langfuse: input must be a message list or {tools, messages}, got str"),
    ("input", {"prompt": "hi"}, "langfuse: input must be a message list or {tools, messages}, got an object without a 'messages' array"),
    ("output", ["hi"], "langfuse: output must be a message object or a text, got list"),
])
def test_wrong_shape_observation_is_an_error_naming_the_field(tmp_path: Path, field: str, value, words: str) -> None:
    obs = _observations()
    i = next(i for i, o in enumerate(obs) if o["type"] == "GENERATION")
    obs[i][field] = value
    src = tmp_path / "export.jsonl"
    src.write_text("".join(json.dumps(o) + "\n" for o in obs))
    stats, rows, errors = run([src], tmp_path / "run")
    assert (stats.exchanges, stats.errors) == (3, 1)
    [err] = errors
    assert (err["source_line"], err["reason"], err["detail"]) == (i + 1, "bad-field", words)


def test_page_with_one_bad_observation_keeps_the_others(tmp_path: Path) -> None:
    page = json.loads((FOLDER / "observations.json").read_text())
    page["data"][1]["output"] = 42
    src = tmp_path / "page.json"
    src.write_text(json.dumps(page))
    stats, rows, errors = run([src], tmp_path / "run")
    assert (stats.exchanges, stats.errors, stats.skipped) == (3, 1, 2)
    assert errors[0]["detail"] == "data[1]: langfuse: output must be a message object or a text, got int"


def test_truncated_export_is_an_error_at_its_last_line(tmp_path: Path) -> None:
    data = (FOLDER / "export.jsonl").read_bytes()
    src = tmp_path / "export.jsonl"
    src.write_bytes(data[:-40])
    stats, rows, errors = run([src], tmp_path / "run")
    [err] = errors
    assert (err["source_line"], err["reason"]) == (6, "bad-json")
    assert err["detail"].startswith("langfuse (observation or API page): ")


def test_forced_langfuse_on_another_format_names_keys_expected_and_found(tmp_path: Path) -> None:
    from replay.capture import ingest
    import pyarrow.parquet as pq

    src = tmp_path / "v1.jsonl"
    src.write_text(json.dumps({"request": {"model": "m", "messages": []}, "route": "chat.completions"}) + "\n")
    ingest([src], tmp_path / "run", capture_format="langfuse")
    [err] = pq.read_table(tmp_path / "run" / "ingest_errors.parquet").to_pylist()
    assert err["detail"] == "langfuse: not an observation: expected id, traceId, type, startTime; found: request, route"
