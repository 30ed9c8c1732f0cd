"""OpenAI stored completions (``store: true``), read from what the openai SDK's pagination exported (issue 21).

``tests/data/captures/openai-stored/`` (``tests/writers/stored_writer.py``): the 4 exchanges sent
with ``store: true`` to the fake server, exported with ``docs/export_stored_completions.py``
(``client.chat.completions.list()`` in pages of 2, ``client.chat.completions.messages.list(id)``):
``files/completions.jsonl`` (2 list pages) and ``files/<id>.messages.json``; ``expected.jsonl``:
what the fake server received and sent. Each exchange is compared with it field by field.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from replay.capture.detect import classify_record, detect_file
from replay.capture.files import discover
from tests.test_otel_sources import CAPTURES, answer_of, expected, message_facts, run

FOLDER = CAPTURES / "openai-stored"
FILES = FOLDER / "files"
LACKS = ["exact_request", "raw_completion", "stream"]


def _pages() -> list[dict]:
    return [json.loads(ln) for ln in (FILES / "completions.jsonl").read_text().splitlines()]


def _copy(tmp_path: Path, messages: bool = True) -> Path:
    out = tmp_path / "export"
    out.mkdir()
    for p in FILES.iterdir():
        if messages or not p.name.endswith(".messages.json"):
            shutil.copy(p, out / p.name)
    return out


def _write_pages(path: Path, pages: list[dict]) -> None:
    path.write_text("".join(json.dumps(p) + "\n" for p in pages))


def test_every_export_file_is_sniffed_as_openai_stored() -> None:
    got = {p.name: detect_file(p) for p in sorted(FILES.iterdir())}
    assert got == {**{f"chatcmpl-fx{n}.messages.json": "openai-stored" for n in range(1, 5)}, "completions.jsonl": "openai-stored"}


def test_export_folder_read_as_the_server_saw_it(tmp_path: Path) -> None:
    files = discover([FILES])
    assert sorted(p.name for p in files) == sorted(p.name for p in FILES.iterdir())
    stats, rows, errors = run(files, tmp_path / "run")
    assert errors == [] and stats.formats == {"openai-stored": 5}
    # 2 list pages of 2 completions; the messages files are read with them (no records of their own)
    assert (stats.lines - stats.shared_line_records, stats.lines, stats.exchanges, stats.skipped) == (2, 4, 4, 0)
    exp = expected("openai-stored")
    assert [r["exchange_id"] for r in rows] == [f"chatcmpl-fx{n}" for n in range(1, 5)] == [
        f"chatcmpl-fx{e['exchange']}" for e in exp]
    for row, e in zip(rows, exp):
        req = json.loads(row["request_json"])
        assert [message_facts(m) for m in req["messages"]] == [message_facts(m) for m in e["request"]["messages"]]
        assert req["messages"] == e["request"]["messages"]  # ids and null content_parts dropped, nothing else changed
        assert req["tools"] == e["request"]["tools"] and len(req["tools"]) == 2
        assert (req["metadata"], req["store"], req["model"]) == ({"app": "weather-agent"}, True, "gpt-4o-mini")
        assert "stream" not in req and row["stream"] is None  # the API does not keep whether it streamed
        assert row["model"] == e["request"]["model"] and row["capture_format"] == "openai-stored"
        content, calls, finish = answer_of(e)  # the body sent, or the chunks joined as the SDK joins them
        got = [(c["id"], c["name"], json.loads(c["arguments"])) for c in row["served_tool_calls"] or []]
        assert (row["served_content"] or None, got, row["served_finish_reason"]) == (content, calls, finish)
        assert row["capture_lacks"] == LACKS
    assert [len(json.loads(r["request_json"])["messages"]) for r in rows] == [2, 4, 2, 2]


def test_a_pretty_printed_page_is_read(tmp_path: Path) -> None:
    out = _copy(tmp_path)
    (out / "completions.jsonl").unlink()
    for i, page in enumerate(_pages(), 1):
        (out / f"completions-{i}.json").write_text(json.dumps(page, indent=2, ensure_ascii=False))
    (out / "chatcmpl-fx2.messages.json").write_text(json.dumps(json.loads((FILES / "chatcmpl-fx2.messages.json").read_text()), indent=2))
    assert {detect_file(p) for p in out.iterdir()} == {"openai-stored"}
    stats, rows, errors = run(discover([out]), tmp_path / "run")
    assert errors == [] and stats.exchanges == 4
    assert sorted(r["exchange_id"] for r in rows) == [f"chatcmpl-fx{n}" for n in range(1, 5)]
    assert all(json.loads(r["request_json"])["messages"] for r in rows)


def test_list_page_without_messages_files_lacks_the_request(tmp_path: Path) -> None:
    out = _copy(tmp_path, messages=False)
    stats, rows, errors = run(discover([out]), tmp_path / "run")
    assert errors == [] and stats.exchanges == 4
    for row in rows:
        assert row["request_json"] == "{}" and row["capture_lacks"] == [*LACKS, "request"]
        assert row["served_finish_reason"] in ("tool_calls", "stop")


def test_completion_without_a_tools_key_lacks_tools_and_null_tools_is_none_sent(tmp_path: Path) -> None:
    out = _copy(tmp_path)
    pages = _pages()
    del pages[0]["data"][0]["tools"]
    pages[0]["data"][1]["tools"] = None
    _write_pages(out / "completions.jsonl", pages)
    stats, rows, errors = run(discover([out]), tmp_path / "run")
    assert errors == []
    by_id = {r["exchange_id"]: r for r in rows}
    assert by_id["chatcmpl-fx1"]["capture_lacks"] == [*LACKS, "tools"] and "tools" not in json.loads(by_id["chatcmpl-fx1"]["request_json"])
    assert by_id["chatcmpl-fx2"]["capture_lacks"] == LACKS and "tools" not in json.loads(by_id["chatcmpl-fx2"]["request_json"])


def test_stored_message_fields_are_rebuilt_as_sent(tmp_path: Path) -> None:
    """A message given as content parts comes back as them; keys the API filled with null are not
    sent again (``name``, ``refusal``), a null ``content`` of an assistant call stays."""
    out = _copy(tmp_path)
    page = json.loads((out / "chatcmpl-fx2.messages.json").read_text())
    parts = [{"type": "text", "text": "Weather in Lisbon?"}]
    page["data"][1].update({"content": None, "content_parts": parts, "name": None})
    page["data"][2]["refusal"] = None
    (out / "chatcmpl-fx2.messages.json").write_text(json.dumps(page))
    _s, rows, errors = run(discover([out]), tmp_path / "run")
    msgs = json.loads(next(r for r in rows if r["exchange_id"] == "chatcmpl-fx2")["request_json"])["messages"]
    assert errors == [] and msgs[1] == {"role": "user", "content": parts}
    assert msgs[2] == {"role": "assistant", "content": None, "tool_calls": page["data"][2]["tool_calls"]}


def test_messages_page_alone_is_an_error_naming_the_convention(tmp_path: Path) -> None:
    src = tmp_path / "chatcmpl-fx2.messages.json"
    shutil.copy(FILES / src.name, src)
    stats, rows, errors = run(discover([tmp_path]), tmp_path / "run")
    assert rows == [] and stats.errors == 1
    assert errors[0]["detail"] == ("openai-stored: chatcmpl-fx2.messages.json is a messages page: it is read with the list page "
                                   "holding its completion, and no list page (GET /v1/chat/completions) was given in its folder")
    other = tmp_path / "messages.json"  # a messages page not named by its completion
    shutil.copy(FILES / "chatcmpl-fx2.messages.json", other)
    _s, rows, errors = run([other], tmp_path / "run2")
    assert rows == [] and errors[0]["detail"].startswith("openai-stored: a messages page read by itself: name it <completion id>.messages.json")


@pytest.mark.parametrize("field,value,words", [
    ("choices", "none", "data[1]: openai-stored: choices must be an array, got str"),
    ("tools", {"type": "function"}, "data[1]: openai-stored: tools must be an array or null, got dict"),
    ("object", "chat.completion.chunk", "data[1]: openai-stored: not a chat.completion: found object 'chat.completion.chunk'"),
    ("id", None, "data[1]: openai-stored: id must be a non-empty string"),
])
def test_wrong_shape_item_is_an_error_naming_format_and_field(tmp_path: Path, field: str, value, words: str) -> None:
    out = _copy(tmp_path)
    pages = _pages()
    pages[0]["data"][1][field] = value
    _write_pages(out / "completions.jsonl", pages)
    stats, rows, errors = run(discover([out]), tmp_path / "run")
    assert (stats.exchanges, stats.errors) == (3, 1)
    [err] = errors
    assert (err["source_line"], err["reason"], err["detail"]) == (1, "bad-field", words)


def test_truncated_page_is_an_error_at_its_line(tmp_path: Path) -> None:
    out = _copy(tmp_path)
    data = (FILES / "completions.jsonl").read_bytes()
    (out / "completions.jsonl").write_bytes(data[:-300])
    stats, rows, errors = run(discover([out]), tmp_path / "run")
    assert (stats.exchanges, stats.errors) == (2, 1)
    [err] = errors
    assert (err["source_line"], err["reason"]) == (2, "bad-json")
    assert err["detail"].startswith("openai-stored (list page of stored completions): ")


@pytest.mark.parametrize("text,words", [
    ('{"object": "list", "data": [{"id": "m1", "role": "user", "content": "hi"}], "has_more": true}',
     "openai-stored: chatcmpl-fx1.messages.json: has_more is true: only the first page of the messages was exported"),
    ('{"object": "list", "data": [{"id": "m1"', "openai-stored: chatcmpl-fx1.messages.json: not JSON: "),
    ('{"object": "list", "data": [{"id": "m1", "content": "hi"}]}',
     "openai-stored: chatcmpl-fx1.messages.json: data[0]: a message needs a 'role'; found: id, content"),
])
def test_bad_messages_file_is_an_error_of_its_completion(tmp_path: Path, text: str, words: str) -> None:
    out = _copy(tmp_path)
    (out / "chatcmpl-fx1.messages.json").write_text(text)
    stats, rows, errors = run(discover([out]), tmp_path / "run")
    assert (stats.exchanges, stats.errors) == (3, 1)
    assert errors[0]["detail"].startswith("data[0]: " + words)


def test_records_go_to_the_format_whose_keys_they_have() -> None:
    """A list page or a messages page is openai-stored; other ``object: list`` responses of the API
    and every other format's record are not."""
    page = _pages()[0]
    messages = json.loads((FILES / "chatcmpl-fx1.messages.json").read_text())
    assert classify_record(page) == classify_record(messages) == "openai-stored"
    assert classify_record(page["data"][0]) == "body"  # one completion by itself is a response body
    assert classify_record({"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.5]}]}) is None
    assert classify_record({"object": "list", "data": [{"id": "gpt-4o", "object": "model"}]}) is None
    assert classify_record({"object": "list", "data": [{"id": "msg_1", "object": "thread.message", "role": "user"}]}) is None
    assert classify_record({"object": "list", "data": []}) is None
    assert classify_record({"data": [{"id": "x", "traceId": "t", "type": "GENERATION", "startTime": "2025-01-01"}], "meta": {}}) == "langfuse"
    assert classify_record({"custom_id": "r", "response": {"body": page["data"][0]}}) == "openai-batch"


def test_forced_openai_stored_on_another_format_names_keys_expected_and_found(tmp_path: Path) -> None:
    src = tmp_path / "v1.jsonl"
    src.write_text(json.dumps({"request": {"model": "m", "messages": []}, "route": "chat.completions"}) + "\n")
    from replay.capture import ingest
    import pyarrow.parquet as pq

    ingest([src], tmp_path / "run", capture_format="openai-stored")
    [err] = pq.read_table(tmp_path / "run" / "ingest_errors.parquet").to_pylist()
    assert err["detail"] == ("openai-stored: not a list page of stored completions: expected object, data, first_id, last_id, "
                             "has_more; found: request, route")


def test_export_script_refuses_an_id_that_is_not_a_file_name(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("export_stored", Path(__file__).parent.parent / "docs" / "export_stored_completions.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.messages_path(tmp_path, "chatcmpl-1") == tmp_path / "chatcmpl-1.messages.json"
    for bad in ("../x", "a/b", "", ".."):
        with pytest.raises(ValueError, match="cannot be a file name"):
            mod.messages_path(tmp_path, bad)
