"""Errors on the command line for bad options, bad captures, bad plugins and damaged run folders:
each gives a clear error naming the file and line or the option (or is counted per record), never
a traceback, and the run goes on where it can; `replay report --fail-on` on a run whose checks never
ran is an error, and the report of an ingest-only run says that nothing was judged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from sides_data import ROOT, invoke, query_json, summary, write_capture

NAMES = [["read"], ["read", "edit"]]


def _audit(tmp_path: Path, *args: str) -> Path:
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    out = tmp_path / "run"
    result = invoke("audit", capture, "--out", out, "-q", "--chunkings", "whole,char", *args)
    assert result.exit_code == 0, result.output
    return out


def test_a_run_written_by_an_older_replay_still_reports_and_queries(tmp_path: Path) -> None:
    """An older run lacks the columns added since (capture_format, served_*, prompt_ids_sha256):
    `replay report`, `replay query` and `replay stream` read those as null instead of failing with
    DuckDB's binder error (a traceback for report and stream)."""
    out = _audit(tmp_path)
    ex = pq.read_table(out / "exchanges.parquet")
    pq.write_table(ex.drop(["capture_format", "capture_lacks", "served_markup"]), out / "exchanges.parquet")
    rn = pq.read_table(out / "renders.parquet")
    pq.write_table(rn.drop(["prompt_ids_sha256", "tokens_differing"]), out / "renders.parquet")

    result = invoke("report", "--run", out)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "calls" in result.output
    got = summary(out)
    assert got["old"]["exchanges"] == 2 and got["old"]["calls_whole"] == 3
    assert query_json(out, "SELECT count(*) AS n FROM exchanges WHERE capture_format IS NULL") == [{"n": 2}]
    result = invoke("stream", "--run", out, "--chunkings", "whole", "-q")
    assert result.exit_code == 0, result.output
    assert summary(out)["new"]["calls_dropped"] == 0


def _word_tokenizer(path: Path) -> Path:
    """A tokenizer.json of 4 words (ids 0-3) written for these tests."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tok = Tokenizer(WordLevel({"sun": 0, "in": 1, "Lisbon": 2, "[UNK]": 3}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(path))
    return path


def test_token_ids_out_of_the_tokenizers_range_are_an_error_of_their_line(tmp_path: Path) -> None:
    """A server log decoded with --tokenizer (output ids not logged are the steps' ids): an id past the vocabulary or negative made the
    tokenizer raise OverflowError out of ingest (a traceback, nothing written); now the line is an
    ingest error naming the field and the id, and the good lines around it are exchanges."""
    tok = _word_tokenizer(tmp_path / "tokenizer.json")
    base = {"model": "Qwen/Qwen3-8B", "request": {"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": "hi"}]}}
    lines = [
        {**base, "request_id": "good", "prompt_token_ids": [0, 1], "step_token_ids": [[0], [1, 2]]},
        {**base, "request_id": "past-vocab", "prompt_token_ids": [0], "step_token_ids": [[0], [2**31 - 1]]},
        {**base, "request_id": "negative", "prompt_token_ids": [-5], "step_token_ids": [[0]]},
        {**base, "request_id": "good2", "output_token_ids": [2, 2]},
    ]
    cap = tmp_path / "srv.jsonl"
    cap.write_text("".join(json.dumps(l) + "\n" for l in lines), encoding="utf-8")
    out = tmp_path / "run"
    result = invoke("ingest", cap, "--out", out, "--tokenizer", tok, "--capture-format", "serverlog")
    assert result.exit_code == 0, result.output
    assert query_json(out, "SELECT exchange_id, server_output_text AS t FROM exchanges ORDER BY source_line") == [
        {"exchange_id": "good", "t": "sun in Lisbon"},
        {"exchange_id": "good2", "t": "Lisbon Lisbon"},
    ]
    errors = query_json(out, "SELECT source_line AS line, reason, detail FROM ingest_errors ORDER BY 1")
    assert [(e["line"], e["reason"]) for e in errors] == [(2, "bad-token-id"), (3, "bad-token-id")]
    assert errors[0]["detail"].startswith("output_token_ids[1] = 2147483647: out of range for the tokenizer (ids 0..3)")
    assert errors[1]["detail"].startswith("prompt_token_ids[0] = -5: out of range")


def test_a_reader_mapping_that_raises_is_an_error_of_its_line(tmp_path: Path) -> None:
    """Any exception of a JSON-lines reader's mapping (not only CaptureError) is one
    `internal-error` at its line; the lines after it are still read."""
    from replay.capture.jsonlines import read_json_lines

    path = tmp_path / "x.jsonl"
    path.write_text('{"n": 1}\n{"n": 0}\n{"n": 2}\n', encoding="utf-8")
    units = list(read_json_lines(path, lambda obj: [{"x": 1 // obj["n"]}]))
    assert [(u.line, u.error.reason if u.error else None) for u in units] == [(1, None), (2, "internal-error"), (3, None)]
    assert units[1].error.detail == "ZeroDivisionError: integer division or modulo by zero"


def test_a_serializer_plugin_that_returns_no_dict_fails_its_renders(tmp_path: Path) -> None:
    """`--new-serializer file.py:fn` where fn returns a string rendered near-empty prompts with no
    error; now every request with tools fails on that side with the reason on its renders row, in
    process and in a worker alike."""
    import sys

    plugin = tmp_path / "ser.py"
    plugin.write_text("def as_text(tool):\n    return 'not a dict'\n")
    for extra in ([], ["--new-python", sys.executable]):
        out = _audit(tmp_path / ("w" if extra else "p"), "--new-serializer", f"{plugin}:as_text", *extra)
        rows = query_json(out, "SELECT side, count(error) AS failed, any_value(error) AS error FROM renders GROUP BY side ORDER BY side")
        assert [(r["side"], r["failed"]) for r in rows] == [("new", 2), ("old", 0), ("reference", 0)], rows
        assert f"serializer {plugin}:as_text returned str, expected a dict" in rows[0]["error"]


def test_a_truncated_har_is_one_error_with_a_one_line_reason(tmp_path: Path) -> None:
    """A HAR cut in the middle of its second entry: the first entry is read, the cut is one
    `bad-json` error at entry 2 whose detail is one line (yajl's multi-line caret drawing, with
    `(right here) ------^`, ended up in the table and the terminal)."""
    entry = {
        "request": {"method": "POST", "url": "https://gw.example/v1/chat/completions", "headers": [],
                    "postData": {"mimeType": "application/json", "text": json.dumps({"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": "hi"}]})}},
        "response": {"status": 200, "content": {"mimeType": "application/json", "text": json.dumps(
            {"id": "c1", "object": "chat.completion", "model": "Qwen/Qwen3-8B",
             "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]})}},
    }
    text = json.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": [entry, entry]}})
    cut = text[: text.rindex('"request"') + 40]
    har = tmp_path / "cut.har"
    har.write_text(cut, encoding="utf-8")
    out = tmp_path / "run"
    result = invoke("ingest", har, "--out", out)
    assert result.exit_code == 0, result.output
    assert query_json(out, "SELECT count(*) AS n FROM exchanges") == [{"n": 1}]
    errors = query_json(out, "SELECT source_line AS line, reason, detail FROM ingest_errors")
    assert [(e["line"], e["reason"]) for e in errors] == [(2, "bad-json")]
    assert errors[0]["detail"].startswith("HAR is not JSON after entry 1: ") and "\n" not in errors[0]["detail"]
    assert "right here" not in result.output


def test_a_side_interpreter_that_is_too_old_or_no_python_and_a_missing_pythonpath_are_named(tmp_path: Path) -> None:
    """`--old-python` an old Python failed with its bare SyntaxError, and a `--old-pythonpath`
    directory that does not exist surfaced only as the plugin's ModuleNotFoundError: each now says
    what is wrong, before any work."""
    old = tmp_path / "python3.8"  # answers the version probe as a Python 3.8, fails the worker as one
    old.write_text('#!/bin/sh\nif [ "$1" = "-c" ]; then echo "3 8"; exit 0; fi\necho "SyntaxError: invalid syntax" >&2\nexit 1\n')
    old.chmod(0o755)
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    cases = [
        (["--old-python", str(old)], f"--old-python {old}: the worker did not start: the worker exited (exit code 1): SyntaxError: invalid syntax (it is Python 3.8; the worker needs Python 3.10 or newer)"),
        (["--old-python", "/bin/sh"], "(it does not run as a Python interpreter)"),
        (["--new-python", sys.executable, "--new-pythonpath", f"{tmp_path}:{tmp_path / 'nowhere'}"], f"--new-pythonpath: no such directory: {tmp_path / 'nowhere'}"),
    ]
    for args, message in cases:
        out = tmp_path / "run"
        result = invoke("audit", capture, "--out", out, "-q", *args)
        assert result.exit_code == 1, result.output
        assert message in " ".join(result.output.split()), result.output
        assert not out.exists()


def test_a_record_that_is_not_of_the_forced_format_is_an_error_not_an_empty_exchange(tmp_path: Path) -> None:
    """`--capture-format serverlog|litellm|otel` on another format's file gave exchanges with
    nothing in them (a HAR as one server-log exchange, OTel exports as LiteLLM rows) or skipped
    every line (LiteLLM rows as OTel), and an export whose `resourceSpans` is not an array stopped
    the ingest with AttributeError; each such line is now a `bad-field` error saying why."""
    cap = tmp_path / "other.jsonl"
    cap.write_text(
        json.dumps({"log": {"version": "1.2", "entries": []}}) + "\n"
        + json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "GET /", "attributes": []}]}]}]}) + "\n"
        + json.dumps({"call_type": "acompletion", "model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}) + "\n"
        + json.dumps({"resourceSpans": "nope"}) + "\n",
        encoding="utf-8",
    )
    expected = {
        "serverlog": [(1, "not a server log line"), (2, "not a server log line"), (3, "not a server log line"), (4, "not a server log line")],
        "litellm": [(1, "not a LiteLLM row"), (2, "not a LiteLLM row"), (4, "not a LiteLLM row")],
        "otel": [(1, "not an OTLP export"), (3, "not an OTLP export"), (4, "resourceSpans must be an array, got str")],
    }
    for fmt, errors in expected.items():
        out = tmp_path / fmt
        result = invoke("ingest", cap, "--out", out, "--capture-format", fmt)
        if fmt == "litellm":  # line 3 is a LiteLLM row
            assert result.exit_code == 0, result.output
        else:  # every line an error (or, for otel, line 2 a span that is no LLM call): no exchange in the file
            assert result.exit_code == 1, result.output
            assert f"error: no exchange in {cap}: {len(errors)} ingest errors (bad-field: {len(errors)};" in " ".join(result.output.split())
        got = query_json(out, "SELECT source_line AS line, reason, detail FROM ingest_errors ORDER BY 1")
        assert [(e["line"], e["detail"][: len(m)]) for e, (_l, m) in zip(got, errors)] == errors, (fmt, got)
        assert all(e["reason"] == "bad-field" for e in got)



def _fails_with(tmp_path: Path, args: list[str], message: str, code: int = 1) -> None:
    """``code``: 1 for a spec that does not load, 2 for a value not of the option's form."""
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    out = tmp_path / "run"
    result = invoke("audit", capture, "--out", out, "-q", *args)
    assert result.exit_code == code, (args, result.output)
    assert message in " ".join(result.output.split()), result.output
    assert "❌" not in result.output and not out.exists()


def test_a_bad_spec_names_its_option_and_a_negative_timeout_is_refused(tmp_path: Path) -> None:
    """Spec errors did not say which of --parser/--old-parser/--new-serializer/... was wrong, and
    a negative --replay-timeout silently meant no limit."""
    _fails_with(tmp_path, ["--parser", "bogus"], "error: --parser bogus: unknown tool parser 'bogus'", code=2)
    _fails_with(tmp_path, ["--old-parser", "json:loads"], "error: --old-parser json:loads: 'json:loads' is not a tool parser")
    _fails_with(tmp_path, ["--new-serializer", "nope"], "error: --new-serializer nope: unknown serializer 'nope'", code=2)
    _fails_with(tmp_path, ["--replay-timeout", "-1"], "error: Invalid value for '--replay-timeout': '-1' is not a number of seconds >= 0 (0: no limit)", code=2)


def test_a_date_that_does_not_exist_says_so(tmp_path: Path) -> None:
    """`--date 2026-13-45` is in the form YYYY-MM-DD; the error said "expected YYYY-MM-DD"."""
    _fails_with(tmp_path, ["--date", "2026-13-45"], "error: Invalid value for '--date': '2026-13-45': not a calendar date (month must be in 1..12)", code=2)
    _fails_with(tmp_path, ["--date", "2025-02-30"], "error: Invalid value for '--date': '2025-02-30': not a calendar date (day is out of range for month)", code=2)
    _fails_with(tmp_path, ["--date", "tomorrow"], "error: Invalid value for '--date': 'tomorrow': expected YYYY-MM-DD", code=2)


def test_colon_words_in_a_message_are_not_turned_into_emoji(tmp_path: Path) -> None:
    """rich's emoji codes turned ':x:' of a spec or a capture path into ❌ in errors and headlines."""
    _fails_with(tmp_path, ["--reference-parser", "nosuch:x:"], "error: --reference-parser nosuch:x:: 'nosuch:x:': expected 'module:attr'")
    capture = write_capture(tmp_path / "c.jsonl", NAMES)
    result = invoke("audit", capture, "--out", tmp_path / "a:x:b", "--chunkings", "whole")
    assert result.exit_code == 0, result.output
    assert "❌" not in result.output
    assert "a:x:b/report.md" in "".join(result.output.split())


def test_the_ingest_headline_counts_skipped_records(tmp_path: Path) -> None:
    """README: `lines - blank_lines - skipped = exchanges + errors`; the headline said "Ingested 2
    lines: 1 exchange, 0 errors." for a HAR whose page load was skipped, so its numbers did not add up."""
    entry = {
        "request": {"method": "POST", "url": "https://gw.example/v1/chat/completions", "headers": [],
                    "postData": {"mimeType": "application/json", "text": json.dumps({"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": "hi"}]})}},
        "response": {"status": 200, "content": {"mimeType": "application/json", "text": json.dumps(
            {"id": "c1", "object": "chat.completion", "model": "Qwen/Qwen3-8B",
             "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]})}},
    }
    page = {"request": {"method": "GET", "url": "https://gw.example/index.html", "headers": []}, "response": {"status": 200, "content": {"text": "<html></html>"}}}
    har = tmp_path / "g.har"
    har.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": [page, entry]}}), encoding="utf-8")
    out = tmp_path / "run"
    result = invoke("audit", har, "--out", out, "--chunkings", "whole")
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "Ingested 2 lines: 1 exchange, 0 errors, 1 skipped (not an LLM exchange)." in report


def test_a_folder_without_capture_files_is_an_error(tmp_path: Path) -> None:
    """An empty folder, or one of `.txt` transcripts, audited "0 lines: 0 exchanges" and wrote an
    empty report; now both commands say no capture file was found and how to name files."""
    (tmp_path / "caps").mkdir()
    (tmp_path / "caps" / "stream.txt").write_text('data: {"choices": []}\n\n', encoding="utf-8")
    for cmd in ("audit", "ingest"):
        out = tmp_path / cmd
        result = invoke(cmd, tmp_path / "caps", "--out", out)
        assert result.exit_code == 1, result.output
        assert f"error: no capture file in {tmp_path / 'caps'}: folders are searched for .jsonl" in " ".join(result.output.split())
        assert not out.exists()
    result = invoke("ingest", tmp_path / "caps" / "stream.txt", "--out", tmp_path / "named", "--capture-format", "sse")
    assert result.exit_code == 0, result.output


def test_a_damaged_run_folder_is_named_not_a_traceback(tmp_path: Path) -> None:
    """A truncated table or a run.json that is not JSON made `replay report`, `render` and
    `stream` end in a traceback; each now names the file, and render/stream fail before rewriting."""
    out = _audit(tmp_path)
    good_meta = (out / "run.json").read_bytes()
    data = (out / "calls.parquet").read_bytes()
    (out / "calls.parquet").write_bytes(data[: len(data) // 2])
    for args in (["report"], ["query", "summary"]):
        result = invoke(*args, "--run", out)
        assert result.exit_code == 1, result.output
        assert f"error: {out / 'calls.parquet'}: not a readable Parquet table" in " ".join(result.output.split())
    (out / "calls.parquet").write_bytes(data)
    (out / "run.json").write_text("{bad", encoding="utf-8")
    before = (out / "renders.parquet").stat().st_mtime_ns
    for args in (["report"], ["render"], ["stream", "--chunkings", "whole"]):
        result = invoke(*args, "--run", out)
        assert result.exit_code == 1, (args, result.output)
        assert f"error: {out / 'run.json'}: not JSON (Expecting property name" in " ".join(result.output.split())
    assert (out / "renders.parquet").stat().st_mtime_ns == before
    (out / "run.json").write_bytes(good_meta)
    assert invoke("report", "--run", out).exit_code == 0


def test_a_capture_with_no_exchange_fails_naming_the_file_and_why(tmp_path: Path) -> None:
    """An empty capture, one of blank lines only, or one whose every line is an ingest error
    audited "0 exchanges" and exited 0 with no warning (a CI gate passed on zeros); now `audit` and
    `ingest` still write the run, then exit 1 naming the file and what its lines were."""
    caps = {
        "empty.jsonl": (b"", "no lines"),
        "blank.jsonl": (b"\n  \n\n", "only blank lines (3)"),
        "bad.jsonl": (b'{"foo": 1}\n[1]\n\xff\n', "3 ingest errors (missing-request: 1, not-object: 1, not-utf8: 1;"),
    }
    for name, (data, why) in caps.items():
        cap = tmp_path / name
        cap.write_bytes(data)
        for cmd in ("audit", "ingest"):
            out = tmp_path / f"{cmd}-{name}"
            result = invoke(cmd, cap, "--out", out, "-q")
            assert result.exit_code == 1, (name, cmd, result.output)
            assert f"error: no exchange in {cap}: {why}" in " ".join(result.output.split()), result.output
            assert (out / "run.json").exists() and (out / "ingest_errors.parquet").exists()
    bad = query_json(tmp_path / "audit-bad.jsonl", "SELECT source_line AS line, reason FROM ingest_errors ORDER BY 1")
    assert bad == [{"line": 1, "reason": "missing-request"}, {"line": 2, "reason": "not-object"}, {"line": 3, "reason": "not-utf8"}]
    good = write_capture(tmp_path / "good" / "c.jsonl", NAMES)
    result = invoke("audit", good, tmp_path / "empty.jsonl", "--out", tmp_path / "mixed", "-q", "--chunkings", "whole")
    assert result.exit_code == 0, result.output


def test_an_out_that_is_a_file_or_under_one_is_named_not_a_traceback(tmp_path: Path) -> None:
    """`replay ingest --out FILE` ended in mkdir's FileExistsError traceback, and `audit --out
    FILE/sub` said only "[Errno 20] Not a directory"; both commands now name --out and the file."""
    cap = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    afile = tmp_path / "afile"
    afile.write_text("keep me\n", encoding="utf-8")
    for cmd in ("ingest", "audit"):
        for out, why in ((afile, "exists and is not a folder"), (afile / "sub", f"{afile} is a file, not a folder")):
            result = invoke(cmd, cap, "--out", out, "-q")
            assert result.exit_code == 1, (cmd, out, result.output)
            assert f"error: --out {out}: {why}" in " ".join(result.output.split()), result.output
            assert "Traceback" not in result.output
    assert afile.read_text(encoding="utf-8") == "keep me\n"


def test_one_unparsable_raw_completion_is_counted_in_the_singular(tmp_path: Path) -> None:
    """One exchange whose model names no parser family: report.md said "1 raw completions the
    reference could not parse"; the count now takes the noun's number."""
    line = json.loads((Path(__file__).resolve().parent.parent / "samples" / "model-gateway.jsonl").read_text(encoding="utf-8").splitlines()[0])
    line.pop("model", None)
    line["request"].pop("model", None)
    cap = tmp_path / "c.jsonl"
    cap.write_text(json.dumps(line) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    result = invoke("audit", cap, "--out", out, "-q", "--chunkings", "whole")
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "1 raw completion the reference could not parse; the call counts above leave them out." in report
    assert "no tool parser family for model None" in report


def test_non_utf8_bytes_in_an_sse_capture_are_an_error_of_their_stream(tmp_path: Path) -> None:
    """A JSON line with bytes that are not UTF-8 is a `not-utf8` error; in an `.sse` capture they
    were replaced by U+FFFD, which the JSON check accepts, so the stream became an exchange whose
    served content held "\ufffd" and nothing was counted. Now that stream is a `not-utf8` error
    naming its line and byte, and the stream before it is still an exchange."""
    from replay.capture import ingest

    def chunk(text: bytes) -> bytes:
        return (b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"'
                + text + b'"},"finish_reason":null}]}\n\n')

    cap = tmp_path / "c.sse"
    cap.write_bytes(chunk(b"fine") + b"data: [DONE]\n\n" + chunk(b"h\xffi") + b"data: [DONE]\n\n")
    stats = ingest([cap], tmp_path / "run")
    assert (stats.exchanges, stats.errors, stats.errors_by_reason) == (1, 1, {"not-utf8": 1})
    assert query_json(tmp_path / "run", "SELECT source_line AS line, served_content AS c FROM exchanges") == [{"line": 1, "c": "fine"}]
    errors = query_json(tmp_path / "run", "SELECT source_line AS line, reason, detail FROM ingest_errors")
    assert errors == [{"line": 5, "reason": "not-utf8", "detail": "line 5: invalid UTF-8 at byte 117: invalid start byte"}]  # the 0xff byte's offset in its line


def test_replay_query_ingest_errors_lists_every_error_by_file_and_line(tmp_path: Path) -> None:
    """The README and the messages sent users to the `ingest_errors` table, but `replay query
    ingest_errors` said "no query 'ingest_errors'". Now it is a query of queries/: every error by
    file, line, kind and message, in file then line order; the report and the no-exchange message
    point to it."""
    caps = tmp_path / "caps"
    write_capture(caps / "a.jsonl", NAMES)
    (caps / "b.jsonl").write_bytes(b'{"route": "chat.completions"}\n[1]\n')
    (caps / "a.jsonl").write_bytes((caps / "a.jsonl").read_bytes() + b"{oops\n")
    out = tmp_path / "run"
    result = invoke("audit", caps, "--out", out, "-q", "--chunkings", "whole")
    assert result.exit_code == 0, result.output
    result = invoke("query", "ingest_errors", "--run", out, "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(Path(r["file"]).name, r["line"], r["kind"]) for r in rows] == [
        ("a.jsonl", 3, "bad-json"), ("b.jsonl", 1, "missing-request"), ("b.jsonl", 2, "not-object")]
    assert rows[2]["message"] == "line is a JSON list, not an object" and rows[2]["excerpt"] == "[1]"
    assert "replay query ingest_errors" in (out / "report.md").read_text(encoding="utf-8")

    only_bad = tmp_path / "bad.jsonl"
    only_bad.write_bytes(b"[1]\n")
    result = invoke("ingest", only_bad, "--out", tmp_path / "run2")
    assert result.exit_code == 1
    assert "`replay query ingest_errors --run RUN` lists them" in result.stderr


def test_a_capture_file_that_gave_no_exchange_is_named_on_stderr_and_in_run_json(tmp_path: Path) -> None:
    """An empty capture among good ones was silent (exit 0, never named). Now each file that gave
    no exchange gets a warning line on stderr saying why (empty, only blank lines, only errors) and
    a row in run.json's ingest section; the run still exits 0 as the good file gave exchanges."""
    caps = tmp_path / "caps"
    write_capture(caps / "good.jsonl", NAMES)
    (caps / "empty.jsonl").write_bytes(b"")
    (caps / "blank.jsonl").write_bytes(b"\n  \n")
    (caps / "bad.jsonl").write_bytes(b"{oops\n\n[1]\n")
    out = tmp_path / "run"
    result = invoke("audit", caps, "--out", out, "-q", "--chunkings", "whole")
    assert result.exit_code == 0, result.output
    warnings = [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        f"warning: no exchange from {caps / 'bad.jsonl'}: only ingest errors (2, and 1 blank lines); "
        "`replay query ingest_errors --run RUN` lists them",
        f"warning: no exchange from {caps / 'blank.jsonl'}: only blank lines (2)",
        f"warning: no exchange from {caps / 'empty.jsonl'}: empty (no lines)",
    ]
    meta = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert meta["ingest"]["exchanges"] == 2
    assert [(Path(f["file"]).name, f["lines"], f["blank_lines"], f["errors"]) for f in meta["ingest"]["files_without_exchanges"]] == [
        ("bad.jsonl", 3, 1, 2), ("blank.jsonl", 2, 2, 0), ("empty.jsonl", 0, 0, 0)]


def test_files_without_exchanges_do_not_depend_on_jobs_and_count_filtered_records(tmp_path: Path) -> None:
    """The per-file counts come from the batches each file gave (also on a pool), and a file whose
    records the filters all dropped says so."""
    from replay.runner.ingest import ingest  # --jobs: the runner's pool
    from replay.capture.filters import Filters

    caps = tmp_path / "caps"
    write_capture(caps / "a.jsonl", NAMES)
    (caps / "b.jsonl").write_bytes(b"\n")
    got = [ingest(sorted(caps.iterdir()), tmp_path / f"run{j}", jobs=j, batch_rows=1).files_without_exchanges for j in (1, 2)]
    assert got[0] == got[1] == [{"file": str(caps / "b.jsonl"), "lines": 1, "blank_lines": 1, "skipped": 0, "errors": 0,
                                 "filtered": 0, "why": "only blank lines (1)"}]
    stats = ingest(sorted(caps.iterdir()), tmp_path / "run3", filters=Filters(models=("other/*",)))
    assert [(Path(f["file"]).name, f["filtered"], f["why"]) for f in stats.files_without_exchanges] == [
        ("a.jsonl", 2, "2 dropped by the filters"), ("b.jsonl", 0, "only blank lines (1)")]


def test_non_utf8_bytes_in_a_base64_har_body_are_an_error_of_their_entry(tmp_path: Path) -> None:
    """A HAR response body with `encoding: base64` was decoded with replacement: bytes that are not
    UTF-8 became U+FFFD, which the JSON check accepts, so the entry became an exchange with mangled
    served text and nothing was counted (as the SSE reader did before). Now the entry is a
    `not-utf8` error naming the entry and the byte; the entry after it is still an exchange."""
    import base64

    from bad_inputs import _BODY, har, har_entry
    from replay.runner.ingest import ingest  # --jobs: the runner's pool

    bad = _BODY.encode().replace(b'"content":null', b'"content":"caf\xe9"', 1)  # Latin-1 where UTF-8 belongs
    assert b"\xe9" in bad
    cap = tmp_path / "g.har"
    cap.write_bytes(har([har_entry(base64.b64encode(bad).decode(), encoding="base64"),
                         har_entry(base64.b64encode(_BODY.encode()).decode(), encoding="base64")]))
    stats = ingest([cap], tmp_path / "run")
    assert (stats.exchanges, stats.errors, stats.errors_by_reason) == (1, 1, {"not-utf8": 1})
    assert query_json(tmp_path / "run", "SELECT source_line AS entry FROM exchanges") == [{"entry": 2}]
    errors = query_json(tmp_path / "run", "SELECT source_line AS entry, reason, detail FROM ingest_errors")
    at = bad.index(b"\xe9")
    assert errors == [{"entry": 1, "reason": "not-utf8",
                       "detail": f"entry 1: response.content.text (base64) is not UTF-8: invalid UTF-8 at byte {at}: invalid continuation byte"}]


def test_a_file_the_filters_emptied_is_in_run_json_but_not_warned_about(tmp_path: Path) -> None:
    """--model keeping none of a file's exchanges is what was asked: no warning line for it (the
    filters' sentence says what was kept), though run.json lists it; a blank file is still named."""
    caps = tmp_path / "caps"
    write_capture(caps / "a.jsonl", NAMES)
    other = caps / "b.jsonl"
    other.write_text(write_capture(tmp_path / "x.jsonl", NAMES).read_text().replace("Qwen/Qwen3-8B", "other/m"), encoding="utf-8")
    (caps / "c.jsonl").write_bytes(b"\n")
    out = tmp_path / "run"
    result = invoke("ingest", caps, "--out", out, "--model", "Qwen/*")
    assert result.exit_code == 0, result.output
    assert [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")] == [
        f"warning: no exchange from {caps / 'c.jsonl'}: only blank lines (1)"]
    meta = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert [(Path(f["file"]).name, f["filtered"], f["why"]) for f in meta["ingest"]["files_without_exchanges"]] == [
        ("b.jsonl", 2, "2 dropped by the filters"), ("c.jsonl", 0, "only blank lines (1)")]


def test_a_batch_output_read_with_its_input_is_not_a_file_without_exchanges(tmp_path: Path) -> None:
    """A Batch output file is read with its input (its records count under the input's file), so
    it is not listed, nor warned about, as an empty capture file ("empty (no lines)" was printed
    for `samples/formats/batch-output.jsonl` on the README's first command)."""
    from replay.runner.ingest import ingest  # --jobs: the runner's pool

    formats = Path(__file__).resolve().parent.parent / "samples" / "formats"
    files = [formats / "batch-input.jsonl", formats / "batch-output.jsonl"]
    for j in (1, 2):
        stats = ingest(files, tmp_path / f"run{j}", jobs=j)
        assert stats.exchanges == 4, stats
        assert stats.files_without_exchanges == []
        assert stats.formats == {"openai-batch": 2}
    result = invoke("ingest", *map(str, files), "--out", tmp_path / "cli")
    assert result.exit_code == 0, result.output
    assert "warning:" not in result.stderr, result.stderr


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "replay", *args], check=False, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


def test_fail_on_a_run_whose_checks_never_ran_is_an_error(tmp_path: Path) -> None:
    """`replay report --fail-on` on a run made by `replay ingest` (no renders, no streams table)
    judged nothing; before the fix the verdict table read all zeros and the gate passed (exit 0).
    Now a gate naming a check whose stage never ran exits 1 naming the missing table; a gate on
    checks whose stage ran still works."""
    run = tmp_path / "run"
    assert _cli("ingest", str(ROOT / "samples" / "coding-agent.jsonl"), "--out", str(run)).returncode == 0
    proc = _cli("report", "--run", str(run), "--fail-on", "broken")
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-1000:])
    assert "--fail-on broken: nothing judged for null-leak" in proc.stderr and "renders.parquet" in proc.stderr
    assert "Traceback" not in proc.stderr
    # render only: render checks gate normally (nothing broken: exit 0), stream checks cannot
    assert _cli("render", "--run", str(run)).returncode == 0
    assert _cli("report", "--run", str(run), "--fail-on", "null-leak:broken>0").returncode == 0
    proc = _cli("report", "--run", str(run), "--fail-on", "dropped-call:broken>0")
    assert proc.returncode == 1 and "nothing judged for dropped-call" in proc.stderr and "streams.parquet" in proc.stderr
    # both stages: the gate is evaluated (samples: 0 broken)
    assert _cli("stream", "--run", str(run)).returncode == 0
    assert _cli("report", "--run", str(run), "--fail-on", "broken").returncode == 0


def test_report_of_an_ingest_only_run_says_nothing_was_judged(tmp_path: Path) -> None:
    """report.md of a run made by `replay ingest` alone said "no exchange has both a served
    response and a raw completion" (false: the coding agent has 7) and listed sides as `None`
    under an all-zero verdict table; it now says that nothing was rendered or re-streamed."""
    run = tmp_path / "run"
    assert _cli("ingest", str(ROOT / "samples" / "coding-agent.jsonl"), "--out", str(run)).returncode == 0
    proc = _cli("report", "--run", str(run))
    assert proc.returncode == 0, proc.stderr[-1000:]
    text = (run / "report.md").read_text()
    assert "Not judged: this run was not rendered or re-streamed" in text
    assert "no exchange has both a served response and a raw completion" not in text
    assert "old = `None`" not in text
    # after render + stream the note is gone
    assert _cli("render", "--run", str(run)).returncode == 0 and _cli("stream", "--run", str(run)).returncode == 0
    assert _cli("report", "--run", str(run)).returncode == 0
    assert "Not judged" not in (run / "report.md").read_text()
