"""LiteLLM logs and the Batch APIs, read from files their own packages wrote (issue #21).

The fixtures under tests/data/captures/ were written by tests/writers/litellm_writer.py (the real
``litellm``: 1.110.2 and 1.67.0, the older spend-log layout) and tests/writers/batch_writer.py (the
``openai`` and ``anthropic`` SDKs' types), each against the scripted fake server of
tests/writers/fake_openai.py, which kept what it received and sent in ``expected.jsonl``. Every
exchange read is compared field by field with that: messages, tools, calls (id, name, arguments),
content, finish_reason, stream flag, and what the capture says it lacks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from replay.capture import ingest
from replay.capture.detect import classify_record, detect_file
from tests.writers.fake_openai import answer_of

DATA = Path(__file__).resolve().parent / "data" / "captures"
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Local time in a time zone",
                                      "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}},
]
STREAMED = {"tool-call": False, "history": False, "parallel-stream": True, "text-stream": True}


def expected(source: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / source / "expected.jsonl").read_text().splitlines()]


def run(src: Path, out: Path, **kw) -> tuple[object, list[dict], list[dict]]:
    stats = ingest(src, out, **kw)
    rows = pq.read_table(out / "exchanges.parquet").to_pylist()
    errors = pq.read_table(out / "ingest_errors.parquet").to_pylist()
    assert stats.lines - stats.blank_lines - stats.skipped == stats.exchanges + stats.errors
    assert (stats.exchanges, stats.errors) == (len(rows), len(errors))
    return stats, rows, errors


def served_calls(row: dict) -> list[tuple[str, str, object]]:
    return [(c["id"], c["name"], json.loads(c["arguments"])) for c in row["served_tool_calls"] or ()]


def check_chat_exchange(row: dict, exp: dict, request_body: dict) -> None:
    """One Chat Completions exchange against what the client sent and what the fake server sent
    (its body, or its chunks joined)."""
    req = json.loads(row["request_json"])
    assert req["messages"] == request_body["messages"]
    assert req["tools"] == TOOLS == request_body["tools"]
    assert row["n_messages"] == len(request_body["messages"]) and row["n_tools"] == 2
    assert row["route"] == "chat.completions"
    content, calls, finish = answer_of(exp)
    assert served_calls(row) == calls
    assert (row["served_content"] or None) == content
    assert row["served_finish_reason"] == finish


# ----------------------------------------------------------------------------- LiteLLM

LITELLM_FILES = {  # file -> what the capture lacks on every exchange
    "standard-logging.jsonl": ["exact_request", "raw_completion", "stream"],
    "bucket": ["exact_request", "raw_completion", "stream"],
    "spend-logs-rows.jsonl": ["raw_completion", "stream"],
    "spend-logs.json": ["raw_completion", "stream"],
    "spend-logs-v2.json": ["raw_completion", "stream"],
}


@pytest.mark.parametrize("release", ["litellm", "litellm-1.67.0"])
@pytest.mark.parametrize("name", sorted(LITELLM_FILES))
def test_litellm_files_read_field_by_field(tmp_path: Path, release: str, name: str) -> None:
    """Every LiteLLM shape, as the package wrote it, gives the 4 exchanges the fake server saw.
    The /spend/logs array and the /spend/logs/v2 page were refused (bad-body, missing-request);
    1.67's rows (body as JSON text in metadata.proxy_server_request) gave request {}."""
    src = DATA / release / "files" / name
    stats, rows, errors = run(src, tmp_path / "run")
    assert errors == [] and stats.exchanges == 4 and stats.formats == {"litellm": 4 if name == "bucket" else 1}
    by_first_message = {json.dumps(e["client_request"]["messages"]): e for e in expected(release)}
    seen = set()
    for row in rows:
        req = json.loads(row["request_json"])
        exp = by_first_message[json.dumps(req["messages"])]  # KeyError: messages not as the client sent them
        seen.add(exp["name"])
        check_chat_exchange(row, exp, exp["client_request"])
        assert row["capture_lacks"] == LITELLM_FILES[name]
        assert row["capture_format"] == "litellm" and row["model"] == "gpt-4o-mini"
        assert bool(req.get("stream")) == STREAMED[exp["name"]]
        # what LiteLLM forwarded upstream is what the client sent (LiteLLM drops `content: null`)
        up = exp["request"]
        assert up["tools"] == TOOLS and [m["role"] for m in up["messages"]] == [m["role"] for m in req["messages"]]
        if not LITELLM_FILES[name][0] == "exact_request":
            assert req == exp["client_request"]  # the exact body the proxy received
    assert seen == set(STREAMED)


def test_litellm_older_layout_is_read_from_metadata() -> None:
    """The fixture really is the older layout (so the test above covers it): 1.67.0's rows keep
    `messages` `{}` and the body as JSON text in `metadata.proxy_server_request`."""
    row = json.loads((DATA / "litellm-1.67.0" / "files" / "spend-logs-rows.jsonl").read_text().splitlines()[0])
    assert "proxy_server_request" not in row and row["messages"] == "{}"
    body = json.loads(json.loads(row["metadata"])["proxy_server_request"])
    assert body["messages"] == expected("litellm-1.67.0")[0]["client_request"]["messages"]


def _spend_row(**over) -> dict:
    base = json.loads((DATA / "litellm" / "files" / "spend-logs-rows.jsonl").read_text().splitlines()[0])
    base.update(over)
    return base


def test_litellm_bad_input_names_format_row_and_field(tmp_path: Path) -> None:
    """A truncated record, and fields of the wrong shape in each LiteLLM layout, become error rows
    naming the format, the row and the field; the good rows around them are read."""
    good = (DATA / "litellm" / "files" / "spend-logs-rows.jsonl").read_text().splitlines()
    old = json.loads((DATA / "litellm-1.67.0" / "files" / "spend-logs-rows.jsonl").read_text().splitlines()[0])
    old["metadata"] = json.dumps({**json.loads(old["metadata"]), "proxy_server_request": "[1, 2]"})
    lines = [
        good[0],
        good[1][: len(good[1]) // 2],  # truncated
        json.dumps(_spend_row(response=5)),
        json.dumps(_spend_row(proxy_server_request="[1]")),
        json.dumps(old),
        json.dumps([json.loads(good[2]), {"request_id": "r", "call_type": "acompletion", "messages": "oops", "response": "{}"}]),
        json.dumps({"data": [{"hello": 1}], "total": 1, "page": 1, "page_size": 50, "total_pages": 1}),
    ]
    src = tmp_path / "spend.jsonl"
    src.write_text("\n".join(lines) + "\n")
    stats, rows, errors = run(src, tmp_path / "run", capture_format="litellm")
    assert stats.exchanges == 2 and len(rows) == 2
    got = [(e["source_line"], e["reason"], e["detail"]) for e in errors]
    assert [(ln, r) for ln, r, _d in got] == [(2, "bad-json"), (3, "bad-field"), (4, "bad-field"), (5, "bad-field"), (6, "bad-field"), (7, "bad-field")]
    assert got[0][2].startswith("litellm record: ")
    assert got[1][2] == "litellm spend-log row: field 'response' must be an object, got int"
    assert got[2][2] == "litellm spend-log row: field 'proxy_server_request' must be a JSON object, got list"
    assert got[3][2] == "litellm spend-log row: field 'metadata.proxy_server_request' must be a JSON object, got list"
    assert got[4][2] == "litellm /spend/logs array row 1: field 'messages' must be a list, got str"
    assert got[5][2].startswith("litellm /spend/logs/v2 page row 0: not a spend-log row") and got[5][2].endswith("found keys: hello")
    assert all(Path(e["source_file"]).name == "spend.jsonl" for e in errors)


# ----------------------------------------------------------------------------- Batch APIs


def _batch_rows(rows: list[dict]) -> dict[tuple[str, str], dict]:
    """Rows by (input file, custom_id)."""
    return {(Path(r["source_file"]).name, r["exchange_id"].split("@")[0]): r for r in rows}


def check_openai_batch(rows: list[dict], inputs: dict[str, str]) -> None:
    """The 4 exchanges of the two OpenAI batches; ``inputs``: expected input name -> name used."""
    assert len(rows) == 4
    by = _batch_rows(rows)
    for exp in expected("openai-batch"):
        row = by[(inputs[exp["input"]], exp["custom_id"])]
        assert json.loads(row["request_json"]) == exp["request"]  # the body the server received
        check_chat_exchange(row, exp, exp["request"])
        assert row["capture_lacks"] == ["stream", "raw_completion"]
        assert row["model"] == exp["request"]["model"]


def test_two_openai_batches_in_one_folder_paired_by_custom_id_and_content(tmp_path: Path) -> None:
    """Two batches in one folder, inputs named as uploaded, outputs `batch_<id>_output.jsonl`, both
    reusing custom_ids request-1 and request-2: each output is joined with its own input (the
    served model tells them apart). Before: no pair, every served call on an exchange without its
    request and every request without its response."""
    src = DATA / "openai-batch" / "files"
    stats, rows, errors = run(src, tmp_path / "run")
    assert errors == [] and stats.formats == {"openai-batch": 4}
    check_openai_batch(rows, {"weather-requests.jsonl": "weather-requests.jsonl", "mixed-requests.jsonl": "mixed-requests.jsonl"})


def test_an_error_file_does_not_take_a_batch_input(tmp_path: Path) -> None:
    """An error file (no result to judge by) beside the outputs: it fits any input holding its
    custom_ids, and must not compete with the output that really fits (both were dropped)."""
    d = tmp_path / "b"
    d.mkdir()
    for f in (DATA / "openai-batch" / "files").iterdir():
        (d / f.name).write_text(f.read_text().replace('"request-', '"m-') if "mixed" in f.name or "a31e9" in f.name else f.read_text())
    err = {"id": "batch_req_x", "custom_id": "request-1", "response": None, "error": {"code": "invalid_request", "message": "bad"}}
    (d / "errors-download.jsonl").write_text(json.dumps(err) + "\n")  # no batch id in its name
    _stats, rows, errors = run(d, tmp_path / "run")
    assert errors == [] and len(rows) == 5
    joined = sorted(r["exchange_id"].split("@")[0] for r in rows if not {"request", "response"} & set(r["capture_lacks"]))
    assert joined == ["m-1", "m-2", "request-1", "request-2"]


def test_two_openai_batches_paired_by_the_batch_id_in_the_names(tmp_path: Path) -> None:
    """Inputs saved under their batch's id pair by that id, even when content could not tell the
    batches apart (here both batches ask for the same model)."""
    d = tmp_path / "b"
    d.mkdir()
    names = {}
    for exp_input, batch in (("weather-requests.jsonl", "batch_6931a2f0c4e881908d1f2b3c4d5e6f70"), ("mixed-requests.jsonl", "batch_6931a31e9b7c8190a4e5f6a7b8c9d0e1")):
        names[exp_input] = f"{batch}-requests.jsonl"
        text = (DATA / "openai-batch" / "files" / exp_input).read_text().replace('"gpt-4.1-mini"', '"gpt-4o-mini"')
        (d / names[exp_input]).write_text(text)
        out = (DATA / "openai-batch" / "files" / f"{batch}_output.jsonl").read_text().replace('"gpt-4.1-mini"', '"gpt-4o-mini"')
        (d / f"{batch}_output.jsonl").write_text(out)
    # OpenAI writes a batch's failed requests to batch_<id>_error.jsonl: the output file is the pair
    err = {"id": "batch_req_x", "custom_id": "request-9", "response": None, "error": {"code": "invalid_request", "message": "bad"}}
    (d / "batch_6931a2f0c4e881908d1f2b3c4d5e6f70_error.jsonl").write_text(json.dumps(err) + "\n")
    _stats, rows, errors = run(d, tmp_path / "run")
    assert errors == []
    lone = [r for r in rows if Path(r["source_file"]).name.endswith("_error.jsonl")]
    assert [tuple(r["capture_lacks"]) for r in lone] == [("request", "stream", "raw_completion", "response")]
    rows = [r for r in rows if r not in lone]
    by = _batch_rows(rows)
    assert len(rows) == 4
    for exp in expected("openai-batch"):
        row = by[(names[exp["input"]], exp["custom_id"])]
        assert served_calls(row) == answer_of(exp)[1]
        assert json.loads(row["request_json"])["messages"] == exp["request"]["messages"]


def test_batches_content_cannot_tell_apart_are_not_guessed(tmp_path: Path) -> None:
    """Two batches with the same custom_ids, model and tools, and no id in the input names: no
    output is joined with a request it may not answer; each is read alone, saying so."""
    d = tmp_path / "b"
    d.mkdir()
    for f in (DATA / "openai-batch" / "files").iterdir():
        (d / f.name).write_text(f.read_text().replace('"gpt-4.1-mini"', '"gpt-4o-mini"'))
    stats, rows, errors = run(d, tmp_path / "run")
    assert errors == [] and stats.exchanges == 8
    lacks = sorted(tuple(r["capture_lacks"]) for r in rows)
    assert lacks == [("request", "stream", "raw_completion")] * 4 + [("stream", "raw_completion", "response")] * 4


def test_anthropic_message_batch_create_body_and_results(tmp_path: Path) -> None:
    """The create call's body `{"requests": [...]}` and the results file: each result joined with
    its request by custom_id (before: the create body was refused, every result had no request)."""
    src = DATA / "anthropic-batch" / "files"
    stats, rows, errors = run(src, tmp_path / "run")
    assert errors == [] and stats.exchanges == 4 and stats.formats == {"openai-batch": 2}
    by = {r["exchange_id"].split("@")[0]: r for r in rows}
    for exp in expected("anthropic-batch"):
        row = by[exp["custom_id"]]
        req = json.loads(row["request_json"])
        assert req == exp["request"]  # the body the server received
        assert row["route"] == "messages" and row["n_tools"] == 2 and row["model"] == "claude-sonnet-4-5"
        assert row["capture_lacks"] == ["stream", "raw_completion"]
        blocks = exp["response"]["content"]
        assert served_calls(row) == [(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
        assert (row["served_content"] or None) == ("".join(b["text"] for b in blocks if b["type"] == "text") or None)
        assert Path(row["source_file"]).name == "message-batch-create.json"


def test_batch_bad_input_names_format_and_field(tmp_path: Path) -> None:
    """A truncated input line, a body that is not an object, a create-body request without params:
    error rows naming the format and the field; the other requests are read and joined."""
    d = tmp_path / "b"
    d.mkdir()
    create = json.loads((DATA / "anthropic-batch" / "files" / "message-batch-create.json").read_text())
    create["requests"][1] = {"custom_id": "request-2"}
    (d / "message-batch-create.json").write_text(json.dumps(create) + "\n")
    shutil.copy(DATA / "anthropic-batch" / "files" / "msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d_results.jsonl", d / "msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d_results.jsonl")
    stats, rows, errors = run(d, tmp_path / "run")
    assert [(e["source_line"], e["reason"], e["detail"]) for e in errors] == [
        (1, "bad-field", "anthropic message batch create body: requests[1] must be an object with custom_id (a string) and params; found custom_id")]
    assert sorted(r["exchange_id"].split("@")[0] for r in rows) == ["request-1", "request-2", "request-3", "request-4"]
    assert [tuple(r["capture_lacks"]) for r in rows if r["exchange_id"].startswith("request-2")] == [("request", "stream", "raw_completion")]

    e = tmp_path / "e"
    e.mkdir()
    lines = (DATA / "openai-batch" / "files" / "weather-requests.jsonl").read_text().splitlines()
    bad_body = json.loads(lines[1])
    bad_body["body"] = "not an object"
    (e / "in.jsonl").write_text(lines[0][: len(lines[0]) // 2] + "\n" + json.dumps(bad_body) + "\n")
    _s, _r, errors = run(e / "in.jsonl", tmp_path / "run2")
    got = [(x["source_line"], x["reason"], x["detail"]) for x in errors]
    assert [(ln, r) for ln, r, _d in got] == [(1, "bad-json"), (2, "request-not-object")]
    assert got[0][2].startswith("openai-batch line: ")
    assert got[1][2] == "openai-batch input: field 'body' must be an object, got str"


# ----------------------------------------------------------------------------- sniffing


def test_every_fixture_file_is_sniffed_as_its_format() -> None:
    got = {str(p.relative_to(DATA)): detect_file(p) for p in sorted(DATA.glob("*/files/**/*")) if p.is_file()
           if p.parent.parent.name in ("litellm", "litellm-1.67.0", "openai-batch", "anthropic-batch") or "bucket" in p.parts}
    want = {k: "openai-batch" if "batch" in k.split("/")[0] else "litellm" for k in got}
    assert got == want and len(got) == 2 * 8 + 4 + 2


def test_records_go_to_the_format_whose_keys_they_have() -> None:
    """LiteLLM's distinctive keys claim LiteLLM records and nothing else: a vLLM-style server log
    with a request_id, a Batch line, a v1 line are not LiteLLM's."""
    payload = json.loads((DATA / "litellm" / "files" / "standard-logging.jsonl").read_text().splitlines()[0])
    row = json.loads((DATA / "litellm" / "files" / "spend-logs-rows.jsonl").read_text().splitlines()[0])
    assert classify_record(payload) == classify_record(row) == classify_record([row]) == "litellm"
    assert classify_record({"data": [row], "total": 1, "page": 1}) == "litellm"
    assert classify_record({"request_id": "r", "prompt_token_ids": [1], "output_text": "x"}) == "serverlog"
    assert classify_record({"request_id": "r", "route": "chat.completions", "request": {}}) == "v1"
    assert classify_record({"custom_id": "r", "request_id": "q", "response": {}}) == "openai-batch"
    assert classify_record({"requests": [{"custom_id": "r", "params": {}}]}) == "openai-batch"
    assert classify_record([1, 2]) is None and classify_record({"data": [1], "page": 1}) is None


def test_forced_format_that_does_not_fit_says_which_keys(tmp_path: Path) -> None:
    """--capture-format litellm on a Batch input, openai-batch on LiteLLM rows: each line an error
    listing the keys expected and the keys found."""
    _s, rows, errors = run(DATA / "openai-batch" / "files" / "weather-requests.jsonl", tmp_path / "a", capture_format="litellm")
    assert rows == [] and len(errors) == 2
    assert errors[0]["detail"] == (
        "not a LiteLLM row: expected call_type or standard_logging_object (standard logging payload), request_id with "
        "call_type or one of spend, proxy_server_request, messages (spend-log row), a JSON array of rows or a page "
        "{data, page}; found keys: custom_id, method, url, body")
    _s, rows, errors = run(DATA / "litellm" / "files" / "spend-logs-rows.jsonl", tmp_path / "b", capture_format="openai-batch")
    assert rows == [] and len(errors) == 4
    assert errors[0]["detail"].startswith("not a Batch line: expected custom_id with body/params (input) or response/error/result (output)")
    assert errors[0]["detail"].endswith("found keys: request_id, call_type, api_key, cache_hit, startTime, endTime, completionStartTime, model")


def test_pretty_printed_documents_are_read(tmp_path: Path) -> None:
    """`curl ... | jq .` of /spend/logs and /spend/logs/v2, and a Message Batch create body saved
    with indent=2 (json.dump's habit), read as the compact files are."""
    d = tmp_path / "p"
    d.mkdir()
    for name in ("spend-logs.json", "spend-logs-v2.json"):
        (d / name).write_text(json.dumps(json.loads((DATA / "litellm" / "files" / name).read_text()), indent=2))
    rows_text = (DATA / "litellm" / "files" / "spend-logs-rows.jsonl").read_text().splitlines()
    (d / "one-a-line.json").write_text("[\n" + ",\n".join(rows_text[:3]) + "\n]\n")  # the last element alone is JSON by itself
    stats, rows, errors = run(d, tmp_path / "run")
    assert errors == [] and stats.formats == {"litellm": 3} and len(rows) == 11
    assert all(json.loads(r["request_json"])["tools"] == TOOLS for r in rows)
    b = tmp_path / "b"
    b.mkdir()
    (b / "create.json").write_text(json.dumps(json.loads((DATA / "anthropic-batch" / "files" / "message-batch-create.json").read_text()), indent=2))
    shutil.copy(DATA / "anthropic-batch" / "files" / "msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d_results.jsonl", b / "results.jsonl")
    stats, rows, errors = run(b, tmp_path / "run2")
    assert errors == [] and stats.exchanges == 4 and stats.formats == {"openai-batch": 2}
    assert all(r["capture_lacks"] == ["stream", "raw_completion"] and r["route"] == "messages" for r in rows)


def test_a_truncated_first_line_loses_only_itself(tmp_path: Path) -> None:
    """JSON lines whose first line was cut (a log rotated mid-write) are still JSON lines: the
    first line is one error, the rows after it are read (it was taken for a pretty-printed
    document and the whole file became one bad-json error)."""
    lines = (DATA / "litellm" / "files" / "spend-logs-rows.jsonl").read_text().splitlines()
    src = tmp_path / "rows.jsonl"
    src.write_text(lines[0][:300] + "\n" + "\n".join(lines[1:]) + "\n")
    stats, rows, errors = run(src, tmp_path / "run")
    assert [(e["source_line"], e["reason"]) for e in errors] == [(1, "bad-json")]
    assert sorted(r["source_line"] for r in rows) == [2, 3, 4]
