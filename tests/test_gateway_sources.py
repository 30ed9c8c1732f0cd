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

#: source -> (file, skipped reasons, what it keeps of a stream: "chunks", "assembled" (the final
#: message without finish_reason), or nothing (Kong's composite leaves the calls out: not read))
SOURCES = {
    "kong": ("file.log", {"kong: log entry with no 'ai' object (a route without an AI plugin)": 1,
                          "kong: AI log entry with no ai.<plugin>.payload (logging.log_payloads off)": 1}, set()),
    "helicone": ("output.jsonl", {}, {"assembled"}),
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
        if streamed and "assembled" in keeps:
            finish = None  # Helicone's consolidated stream keeps no finish_reason
        elif streamed and not keeps:
            content, calls, finish = None, [], None  # not read: no served side
            assert {"stream", "response"} <= set(row["capture_lacks"])
        assert (row["served_content"] or None, got_calls, row["served_finish_reason"]) == (content, calls, finish)
        if streamed:
            assert row["served_chunks"] is None and "stream" in row["capture_lacks"]
        assert not row["served_non_json_calls"]


def test_kong_stream_composite_is_not_taken_for_what_was_served(tmp_path: Path) -> None:
    """AI Proxy logs a stream as a composite of the deltas' content and the last finish_reason
    (``normalize-sse-chunk.lua``): for the parallel-call stream, ``tool_calls`` with no calls. Read as
    served, it would be a served finish-reason fault that the server never made."""
    entry = next(json.loads(ln) for ln in _lines("kong") if "Paris" in ln)
    composite = json.loads(entry["ai"]["proxy"]["payload"]["response"])
    assert composite["choices"][0]["finish_reason"] == "tool_calls" and "tool_calls" not in composite["choices"][0]["message"]
    stats, rows, errors = run([CAPTURES / "kong" / "file.log"], tmp_path / "run")
    row = next(r for r in rows if "Paris" in r["request_json"])
    assert (row["served_finish_reason"], row["served_tool_calls"], row["served_stop_with_calls"]) == (None, None, None)


def test_kong_response_logged_as_sse_text_is_read_as_chunks(tmp_path: Path) -> None:
    """A response payload that is SSE text (a log written from the raw stream) is split into its chunks."""
    from replay.capture.gateways import kong_record

    exp = expected("kong")[2]
    entry = next(json.loads(ln) for ln in _lines("kong") if "Paris" in ln)
    entry["ai"]["proxy"]["payload"]["response"] = "".join(f"data: {json.dumps(c)}\n\n" for c in exp["stream"]) + "data: [DONE]\n\n"
    [rec] = kong_record(entry)
    assert [json.loads(c) for c in rec["stream"][:-1]] == exp["stream"] and rec["stream"][-1] == "[DONE]"
    assert "stream" not in rec["capture_lacks"]


def test_helicone_streamed_data_is_read_as_the_chunks(tmp_path: Path) -> None:
    """Helicone's stream processor keeps the chunks beside the consolidated body (``streamed_data``);
    a record that still holds them gives the stream as served, finish_reason included."""
    lines = _lines("helicone")
    exp = expected("helicone")
    obj = json.loads(lines[2])
    obj["response_body"]["streamed_data"] = exp[2]["stream"]
    lines[2] = json.dumps(obj)
    src = tmp_path / "output.jsonl"
    src.write_text("\n".join(lines) + "\n")
    stats, rows, errors = run([src], tmp_path / "run")
    row = next(r for r in rows if r["source_line"] == 3)
    assert row["served_chunks"] == len(exp[2]["stream"]) and "stream" not in row["capture_lacks"]
    content, calls, finish = answer_of(exp[2])
    got = [(c["id"], c["name"], json.loads(c["arguments"])) for c in row["served_tool_calls"]]
    assert (got, row["served_finish_reason"]) == (calls, finish)


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
    src.write_text(json.dumps(items) + "\n")  # the same array on one line (JSON.stringify without indent)
    stats, rows, errors = run([src], tmp_path / "run1")
    assert (stats.exchanges, errors) == (4, [])


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
    assert err["detail"].startswith({"kong": "kong (Kong log entry): ", "helicone": "helicone (Helicone export record): "}[source])


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


#: trace store -> (the OTel fixture whose spans it holds, its skipped reasons)
TRACE_STORES = {
    "jaeger": ("openllmetry-indexed", {"otel: llm.request.type embedding is not a model call": 1}),
    "zipkin": ("otel-genai-spans", {"otel: gen_ai.operation.name invoke_agent is not a model call": 1,
                                    "otel: gen_ai.operation.name execute_tool is not a model call": 1,
                                    "otel: gen_ai.operation.name embeddings is not a model call": 1}),
}
#: the columns an exchange read from a trace store must share with the same span read from OTLP JSON
SAME = ("exchange_id", "route", "model", "stream", "request_json", "tools_json", "served_content", "served_tool_calls",
        "served_finish_reason", "capture_lacks")


@pytest.mark.parametrize("store", sorted(TRACE_STORES))
def test_trace_store_download_reads_as_its_otlp_spans(tmp_path: Path, store: str) -> None:
    """Jaeger's and Zipkin's JSON of the spans an instrumentation wrote give the exchanges its OTLP
    export gives: tags typed back where the reader needs a type (a Zipkin ``"true"``, an array as JSON text)."""
    source, skipped_by = TRACE_STORES[store]
    path = CAPTURES / store / "trace.json"
    assert detect_file(path) == "otel"
    stats, rows, errors = run([path], tmp_path / "store")
    _s, otlp_rows, _e = run([CAPTURES / source / "traces.jsonl"], tmp_path / "otlp")
    assert errors == [] and stats.skipped_by == skipped_by
    key = lambda r: r["exchange_id"]  # noqa: E731
    assert [{c: r[c] for c in SAME} for r in sorted(rows, key=key)] == [{c: r[c] for c in SAME} for r in sorted(otlp_rows, key=key)]
    # the span's start: Jaeger and Zipkin keep microseconds of OTLP's nanoseconds
    assert all(abs((a["ts"] - b["ts"]).total_seconds()) < 2e-6 for a, b in zip(sorted(rows, key=key), sorted(otlp_rows, key=key)))
    for e in expected(store):
        row = next(r for r in rows if r["exchange_id"] == (e["response"] or e["stream"][0])["id"])
        req = json.loads(row["request_json"])
        assert [message_facts(m) for m in req["messages"]] == [message_facts(m) for m in e["request"]["messages"]]
        content, calls, finish = answer_of(e)
        got_calls = [(c["id"], c["name"], json.loads(c["arguments"])) for c in row["served_tool_calls"] or []]
        assert (row["served_content"] or None, got_calls, row["served_finish_reason"]) == (content, calls, finish)
    if store == "jaeger":  # OpenLLMetry's llm.is_streaming, a typed bool tag
        assert sorted(r["stream"] for r in rows) == [False, False, True, True]


def test_zipkin_string_tags_are_typed_back(tmp_path: Path) -> None:
    """Zipkin writes every attribute as a string: ``llm.is_streaming`` ``"true"`` and a finish-reason
    array as JSON text must read as the bool and the list."""
    from replay.capture.otel import records_from_export

    span = {"traceId": "ab" * 16, "id": "cd" * 8, "name": "openai.chat", "timestamp": 1764500000000000, "localEndpoint": {"serviceName": "s"},
            "tags": {"llm.is_streaming": "true", "gen_ai.response.finish_reasons": '["tool_calls"]', "gen_ai.request.model": "m",
                     "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hi"}}
    assert classify_record(span) == "otel"
    [rec] = records_from_export(span)
    assert rec["request"]["stream"] is True
    assert rec["ts"] == 1764500000.0
    assert rec["capture_lacks"] == ["exact_request", "raw_completion", "stream", "tools", "response"]


def test_jaeger_tags_of_the_wrong_shape_are_an_error_naming_them(tmp_path: Path) -> None:
    doc = json.loads((CAPTURES / "jaeger" / "trace.json").read_text())
    doc["data"][0]["spans"][0]["tags"] = {"gen_ai.prompt.0.role": "user"}
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(doc))
    stats, rows, errors = run([src], tmp_path / "run")
    [err] = errors
    assert (err["source_line"], err["reason"]) == (1, "bad-field")
    assert err["detail"] == "jaeger data[0].spans[0].tags must be an array of {key, type, value} objects"


#: every fixture file written by a source's own code (or to its upstream source) -> its format
FIXTURE_FORMATS = {
    "kong/file.log": "kong", "helicone/output.jsonl": "helicone", "vllm-log/vllm.log": "vllm-log", "jaeger/trace.json": "otel",
    "zipkin/trace.json": "otel", "mitmproxy/flows.mitm": "mitmproxy", "mitmproxy/flows.har": "har",
    "langfuse/export.jsonl": "langfuse", "langfuse/observations.json": "langfuse",
    "openinference/traces.jsonl": "otel", "otel-genai-events/logs.jsonl": "otel",
}


def test_every_record_of_every_fixture_names_its_own_format() -> None:
    """Sniffing goes by each format's distinctive keys: every JSON record of a fixture (not only
    the first, which decides the file) classifies as its file's format, so no file is taken for
    another format whatever record it starts with (a Kong file starting with a non-AI entry included)."""
    for name, fmt in FIXTURE_FORMATS.items():
        path = CAPTURES / name
        assert detect_file(path) == fmt, name
        if fmt in ("vllm-log", "mitmproxy", "har") or path.suffix == ".json":
            continue
        for ln in path.read_text().splitlines():
            assert classify_record(json.loads(ln)) == fmt, (name, ln[:80])
    for record in _lines("kong"):  # the entry of a route with no AI plugin, first in a file
        obj = json.loads(record)
        if "ai" not in obj:
            assert classify_record(obj) == "kong"


def test_a_kong_entry_forced_as_v1_says_whose_keys_it_has(tmp_path: Path) -> None:
    """``--capture-format v1`` on Kong's log gave ``route must be one of ...; got {'name': 'chat', ...}``
    and nothing more; the error now names the format whose keys the record has."""
    from replay.capture import ingest
    import pyarrow.parquet as pq

    ingest([CAPTURES / "kong" / "file.log"], tmp_path / "run", capture_format="v1")
    errors = pq.read_table(tmp_path / "run" / "ingest_errors.parquet").to_pylist()
    assert len(errors) == 6 and {e["reason"] for e in errors} == {"bad-field"}
    assert errors[0]["detail"].startswith("route must be one of ")
    assert errors[0]["detail"].endswith("; its keys are those of a kong record (read as v1: --capture-format kong, or let the format be detected)")


def test_a_folder_is_searched_for_log_and_mitm_files(tmp_path: Path) -> None:
    """Kong's file log and vLLM's log end in ``.log``, mitmdump's dump in ``.mitm``: a folder holding
    them is read whole (``replay audit logs/``)."""
    import shutil

    from replay.capture.files import discover

    folder = tmp_path / "logs"
    folder.mkdir()
    for name in ("kong/file.log", "vllm-log/vllm.log", "mitmproxy/flows.mitm"):
        shutil.copy(CAPTURES / name, folder / name.replace("/", "-"))
    assert sorted(p.name for p in discover([folder])) == ["kong-file.log", "mitmproxy-flows.mitm", "vllm-log-vllm.log"]
    stats, rows, errors = run([folder], tmp_path / "run")
    assert (stats.formats, stats.exchanges, errors) == ({"kong": 1, "vllm-log": 1, "mitmproxy": 1}, 12, [])
