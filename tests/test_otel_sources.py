"""The OpenTelemetry family of capture sources, read from files the upstream packages wrote (issue 21).

``tests/data/captures/<source>/`` holds what each instrumentation wrote around the ``openai`` SDK
talking to the fake server of ``tests/writers/fake_openai.py`` (``tests/writers/otel_writer.py``
names the releases), and ``expected.jsonl``: what that server received and sent. Each exchange
read from a fixture is compared with it field by field: messages (roles, text, tool calls with
their ids and arguments, tool results with their call ids), tools, the stream flag where the source
keeps it, and the answer (content, calls, finish_reason; a stream assembled from the chunks sent).
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from replay.capture import ingest
from replay.capture.detect import classify_record, detect_file
from replay.capture.otel import records_from_export
from replay.capture.records import Skip
from tests.writers.fake_openai import answer_of

CAPTURES = Path(__file__).parent / "data" / "captures"

#: source -> (capture files, what the source keeps: "tools", "stream" (the request's stream flag), "exact" (the request body as sent))
SOURCES = {
    "otel-genai-spans": (["traces.jsonl"], set()),
    "otel-genai-events": (["traces.jsonl", "logs.jsonl"], set()),
    "openllmetry": (["traces.jsonl"], {"tools", "stream"}),
    "openllmetry-indexed": (["traces.jsonl"], {"tools", "stream"}),
    "openinference": (["traces.jsonl"], {"tools", "stream", "exact"}),
}

NO_CONTENT = ("otel: no content (no input or output message attributes: content capture off, content on log records, "
              "or a server span such as vLLM's llm_request)")
_AGENT = {"otel: gen_ai.operation.name invoke_agent is not a model call": 1, "otel: gen_ai.operation.name execute_tool is not a model call": 1}
#: source -> the spans its writer wrote beside the exchanges (an embedding call; util-genai's agent
#: and tool spans; the event mode's content-less chat spans), skipped with these reasons, and the
#: lines and records of its files
SKIPS = {
    "otel-genai-spans": ({**_AGENT, "otel: gen_ai.operation.name embeddings is not a model call": 1}, 4, 7),
    "otel-genai-events": ({**_AGENT, "otel: gen_ai.operation.name embeddings is not a model call": 1, NO_CONTENT: 4}, 8, 11),
    "openllmetry": ({"otel: gen_ai.operation.name embeddings is not a model call": 1}, 4, 5),
    "openllmetry-indexed": ({"otel: llm.request.type embedding is not a model call": 1}, 4, 5),
    "openinference": ({"otel: openinference.span.kind EMBEDDING is not a model call": 1}, 4, 5),
}


def expected(source: str) -> list[dict]:
    return [json.loads(ln) for ln in (CAPTURES / source / "expected.jsonl").read_text().splitlines()]


def run(paths: list[Path], out: Path):
    stats = ingest(paths, out)
    rows = pq.read_table(out / "exchanges.parquet").to_pylist()
    errors = pq.read_table(out / "ingest_errors.parquet").to_pylist()
    return stats, rows, errors


def message_facts(m: dict) -> dict:
    """What a message says, in one form whatever the writer: arguments as JSON values, a null and a
    missing content alike."""
    return {
        "role": m.get("role"),
        "content": m.get("content") or None,
        "tool_calls": [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in m.get("tool_calls") or []],
        "tool_call_id": m.get("tool_call_id"),
    }


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_fixture_reads_as_the_server_saw_it(source: str, tmp_path: Path) -> None:
    files, keeps = SOURCES[source]
    stats, rows, errors = run([CAPTURES / source / f for f in files], tmp_path / "run")
    exp = expected(source)
    assert errors == []
    assert len(rows) == len(exp) == 4
    assert stats.formats == {"otel": len(files)}
    skipped_by, lines, records = SKIPS[source]
    assert stats.skipped_by == skipped_by
    assert (stats.lines - stats.shared_line_records, stats.lines, stats.skipped) == (lines, records, records - 4)
    by_id = {r["exchange_id"]: r for r in rows}
    for e in exp:
        sent = e["response"] or e["stream"][0]
        row = by_id[sent["id"]]  # the response id the server sent names the exchange
        req = json.loads(row["request_json"])
        # messages, field by field
        assert [message_facts(m) for m in req["messages"]] == [message_facts(m) for m in e["request"]["messages"]], source
        assert row["model"] == e["request"]["model"]
        # tools: as the client declared them, where the source records them
        if "tools" in keeps:
            assert req["tools"] == e["request"]["tools"]
            assert "tools" not in row["capture_lacks"]
        else:
            assert "tools" not in req and "tools" in row["capture_lacks"]
        if "stream" in keeps:
            assert row["stream"] is bool(e["request"].get("stream"))
        if "exact" in keeps:
            assert req == e["request"]
            assert "exact_request" not in row["capture_lacks"]
        else:
            assert "exact_request" in row["capture_lacks"]
        # the answer: what the server sent (no source keeps the chunks)
        content, calls, finish = answer_of(e)
        got_calls = [(c["id"], c["name"], json.loads(c["arguments"])) for c in row["served_tool_calls"] or []]
        assert (row["served_content"] or None, got_calls, row["served_finish_reason"]) == (content, calls, finish)
        assert {"raw_completion", "stream"} <= set(row["capture_lacks"])
        assert row["served_non_json_calls"] == 0


def test_flat_tool_definitions_are_converted_and_say_so(tmp_path: Path) -> None:
    """OpenLLMetry's current release writes ``gen_ai.tool.definitions`` flat (``{type, name,
    description, parameters}``): every render failed with ``tool has no 'function' object``."""
    _stats, rows, _ = run([CAPTURES / "openllmetry" / "traces.jsonl"], tmp_path / "run")
    for row in rows:
        assert json.loads(row["tools_json"]) == expected("openllmetry")[0]["request"]["tools"]
        assert "tool_shape" in row["capture_lacks"]
    _stats, rows, _ = run([CAPTURES / "openinference" / "traces.jsonl"], tmp_path / "run2")
    assert all("tool_shape" not in r["capture_lacks"] for r in rows)


def test_event_mode_content_is_read_and_its_empty_spans_skipped(tmp_path: Path) -> None:
    """The content of the event mode is on ``gen_ai.client.inference.operation.details`` log records
    (``resourceLogs``); the spans hold none and are skipped with their reason, never exchanges."""
    folder = CAPTURES / "otel-genai-events"
    assert detect_file(folder / "logs.jsonl") == "otel"
    stats, rows, _ = run([folder / "traces.jsonl"], tmp_path / "spans")
    assert (stats.lines, stats.exchanges, stats.skipped, rows) == (7, 0, 7, [])
    assert stats.skipped_by[NO_CONTENT] == 4
    stats, rows, _ = run([folder / "logs.jsonl"], tmp_path / "logs")
    assert (stats.lines, stats.exchanges, stats.skipped) == (4, 4, 0)
    assert sorted(r["exchange_id"] for r in rows) == ["chatcmpl-fx1", "chatcmpl-fx2", "chatcmpl-fx3", "chatcmpl-fx4"]


def _with_spans(line: str, *extra: dict) -> str:
    obj = json.loads(line)
    obj["resourceSpans"][0]["scopeSpans"][0]["spans"].extend(extra)
    return json.dumps(obj)


def _span(name: str, **attrs: str) -> dict:
    return {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": name, "startTimeUnixNano": "1764500000000000000",
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}


def test_agent_tool_embedding_and_server_spans_are_skipped_and_lines_counted(tmp_path: Path) -> None:
    """An agent's trace holds ``invoke_agent``, ``execute_tool`` and ``embeddings`` spans beside the
    model calls, and vLLM's own ``llm_request`` spans hold no content (``vllm/tracing.py``): each
    is skipped with its reason, and a 4-line file of 11 spans says 4 lines, 11 records."""
    lines = (CAPTURES / "openllmetry" / "traces.jsonl").read_text().splitlines()
    agent = _span("invoke_agent weather", **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"})
    tool = _span("execute_tool get_weather", **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"})
    emb = _span("embeddings text-embedding-3-small", **{"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "text-embedding-3-small"})
    # vLLM's own span (--otlp-traces-endpoint), written from vllm/tracing.py's SpanAttributes: a
    # SERVER span named llm_request with ids, usage and latencies, never the messages
    vllm = {"traceId": "ef" * 16, "spanId": "01" * 8, "name": "llm_request", "kind": "SPAN_KIND_SERVER", "attributes": [
        {"key": "gen_ai.request.model", "value": {"stringValue": "Qwen/Qwen3-8B"}},
        {"key": "gen_ai.request.id", "value": {"stringValue": "chatcmpl-v1"}},
        {"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "12"}},
        {"key": "gen_ai.latency.time_to_first_token", "value": {"doubleValue": 0.01}}]}
    src = tmp_path / "agent.jsonl"
    # openllmetry's own file: 4 chat spans and, on line 4, an embeddings span
    src.write_text("\n".join([_with_spans(lines[0], agent, tool), _with_spans(lines[1], emb, vllm), _with_spans(lines[2], agent, tool), lines[3]]) + "\n")
    stats, rows, errors = run([src], tmp_path / "run")
    assert (stats.lines, stats.shared_line_records, stats.exchanges, stats.skipped, stats.errors) == (11, 7, 4, 7, 0)
    assert str(stats).startswith("4 lines, 11 records: 4 exchanges, 0 errors, 7 skipped")
    assert stats.skipped_by == {
        "otel: gen_ai.operation.name invoke_agent is not a model call": 2,
        "otel: gen_ai.operation.name execute_tool is not a model call": 2,
        "otel: gen_ai.operation.name embeddings is not a model call": 2,
        NO_CONTENT: 1,
    }
    assert sorted(r["exchange_id"] for r in rows) == ["chatcmpl-fx1", "chatcmpl-fx2", "chatcmpl-fx3", "chatcmpl-fx4"]


def test_openinference_non_llm_spans_are_skipped() -> None:
    span = {"spanId": "aa" * 8, "name": "retrieve", "attributes": {"openinference.span.kind": "RETRIEVER", "input.value": "weather?"}}
    assert records_from_export(span) == [Skip("otel: openinference.span.kind RETRIEVER is not a model call")]


def _replace_attr(line: str, key: str, value: dict) -> str:
    obj = json.loads(line)
    top = "resourceSpans" if "resourceSpans" in obj else "resourceLogs"
    scope = obj[top][0]["scopeSpans" if top == "resourceSpans" else "scopeLogs"][0]
    item = (scope.get("spans") or scope.get("logRecords"))[0]
    for kv in item["attributes"]:
        if kv["key"] == key:
            kv["value"] = value
            break
    else:
        raise AssertionError(f"{key} not in the fixture")
    return json.dumps(obj)


#: source file, attribute, wrong-shape value, words the error detail must hold
BAD_ATTRS = [
    ("otel-genai-spans/traces.jsonl", "gen_ai.input.messages", {"stringValue": '{"role": "user"}'}, "gen_ai.input.messages must be a JSON array of messages, got dict"),
    ("otel-genai-spans/traces.jsonl", "gen_ai.output.messages", {"stringValue": '[{"role": "assistant", "parts": "hi"}]'}, "gen_ai.output.messages[0].parts must be an array, got str"),
    ("otel-genai-events/logs.jsonl", "gen_ai.input.messages", {"kvlistValue": {"values": []}}, "gen_ai.input.messages must be a JSON array of messages, got dict"),
    ("openllmetry/traces.jsonl", "gen_ai.tool.definitions", {"stringValue": '["get_weather"]'}, "gen_ai.tool.definitions[0] must be an object, got str"),
    ("openllmetry-indexed/traces.jsonl", "llm.request.functions.0.parameters", {"stringValue": '{"type": "object", '}, "llm.request.functions.0.parameters must be a JSON object, got text that is not JSON"),
    ("openinference/traces.jsonl", "input.value", {"stringValue": '{"model": "gpt-4o-mini", "messages": ['}, "input.value must be a JSON object"),
]


@pytest.mark.parametrize("path,key,value,words", BAD_ATTRS, ids=[f"{p.split('/')[0]}:{k}" for p, k, _v, _w in BAD_ATTRS])
def test_wrong_shape_attribute_is_an_error_row_naming_it(tmp_path: Path, path: str, key: str, value: dict, words: str) -> None:
    lines = (CAPTURES / path).read_text().splitlines()
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join([_replace_attr(lines[0], key, value)] + lines[1:]) + "\n")
    stats, rows, errors = run([src], tmp_path / "run")
    assert (stats.exchanges, stats.errors) == (3, 1)
    [err] = errors
    assert (err["source_line"], err["reason"]) == (1, "bad-field")
    assert err["detail"].startswith("otel ") and words in err["detail"]


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_truncated_export_is_an_error_row_naming_the_format(tmp_path: Path, source: str) -> None:
    """A file cut in the middle of its last export line (a collector stopped mid-write)."""
    name = SOURCES[source][0][-1]
    data = (CAPTURES / source / name).read_bytes()
    src = tmp_path / name
    src.write_bytes(data[: len(data) - len(data.splitlines()[-1]) // 2 - 1])
    stats, rows, errors = run([src], tmp_path / "run")
    assert (stats.errors, stats.exchanges) == (1, 3)
    [err] = errors
    assert (err["source_line"], err["reason"]) == (4, "bad-json")
    assert err["detail"].startswith("otel (OTLP JSON export): ")


def test_sniffing_goes_by_the_distinctive_keys() -> None:
    for source, (files, _keeps) in SOURCES.items():
        for f in files:
            assert detect_file(CAPTURES / source / f) == "otel", (source, f)
    logs = orjson.loads((CAPTURES / "otel-genai-events" / "logs.jsonl").read_bytes().splitlines()[0])
    assert classify_record(logs) == "otel"
    assert classify_record({"resourceLogs": []}) == "otel"
    # a LiteLLM row or a v1 line that happens to carry "attributes" is not a span without a spanId
    assert classify_record({"request": {"model": "m"}, "route": "chat.completions", "attributes": {}}) == "v1"


def test_headline_says_what_each_otel_source_lacks(tmp_path: Path) -> None:
    """The report's format headline names the converted tool shape and the tools a span did not log."""
    from replay.capture.headlines import capture_headlines
    from replay.sql import connect, run_query

    files = [CAPTURES / "openllmetry" / "traces.jsonl", CAPTURES / "otel-genai-spans" / "traces.jsonl"]
    ingest(files, tmp_path / "run")
    con = connect(tmp_path / "run")
    [line] = capture_headlines({"capture_formats": run_query(con, "capture_formats")})
    assert line == ("8 exchanges from otel: request rebuilt from logged fields; no raw completion, not re-streamed; "
                    "no chunks (served side checked on the final response only); 4 with no tool declarations logged "
                    "(the request may have had some); 4 with tool declarations converted from the flat GenAI form to the "
                    "Chat Completions shape.")


def test_skip_reason_quotes_a_bounded_piece_of_the_capture() -> None:
    """The reason is a key of ``skipped_by`` (run.json, report.md): a captured value in it is cut."""
    [skip] = records_from_export({"spanId": "ab", "attributes": {"gen_ai.operation.name": "x" * 500}})
    assert skip == Skip(f"otel: gen_ai.operation.name {'x' * 60} is not a model call")
