"""Secrets planted in every capture format never reach a run folder, stdout or stderr.

Each format's builder writes captures holding: an ``Authorization`` header, an ``x-api-key``, a
cookie, an ``api_key`` field in the request body, a password in request metadata, an ``sk-`` key
in the logged prompt and raw completion, a JWT as a tool's default, and a bad line quoting a key
(its ``excerpt`` and ``detail``). Message text carries an ``sk-`` key and a pass phrase that only
``--redact`` can remove (a phrase has no key shape). The real CLI (``python -m replay audit`` and
``python -m replay ingest``) runs in a child process; every file of the run folder is searched as
raw bytes and, for Parquet, decoded through pyarrow; stdout and stderr too. Formats: capture v1
(plain, zst, gz), SSE transcripts, response bodies, Batch input/output pairs, HAR, server logs,
LiteLLM spend logs, OpenTelemetry spans; each where the format has room for the secret (a header
only where the format carries headers). A control run without
``--redact`` shows the message pass phrase does reach the tables, so the search can find it.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import orjson
import pyarrow.parquet as pq
import pytest
import zstandard

ROOT = Path(__file__).resolve().parents[1]

# Secrets whose only protection is their name (no key shape): dropped by the name rule.
AUTH = "opaque-auth-value-A1"
XKEY = "opaque-xkey-value-B2"
COOKIE = "opaque-cookie-value-C3"
BODY_KEY = "opaque-body-apikey-D4"
PASSWORD = "opaque-password-E5"
# Secrets with a key shape: replaced wherever they stand.
SK_PROMPT = "sk-proj-Prompt9f8e7d6c5b4a3210ZYXW"
SK_BAD_LINE = "sk-ant-api03-BadLine1234567890abcdefGHIJ"
JWT_TOOL = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0b29sZGVmYXVsdCJ9.c2lnbmF0dXJlMTIzNDU2Nzg5"
BEARER = "Bearer tok-bearer-F6-0123456789abcdef"
# Message text: kept without --redact (the control), hashed with it.
SK_MESSAGE = "sk-live-Message1234567890abcdefghijklm"
PHRASE = "correct horse battery staple 7731"

ALWAYS = [AUTH, XKEY, COOKIE, BODY_KEY, PASSWORD, SK_PROMPT, SK_BAD_LINE, JWT_TOOL, BEARER.split()[1]]
MESSAGE_ONLY = [PHRASE]


def _v1_records() -> list[bytes]:
    tool = {"type": "function", "function": {"name": "login", "parameters": {"type": "object", "properties": {
        "token": {"type": "string", "default": JWT_TOOL}, "token_budget": {"type": "integer"}}}}}
    request = {
        "model": "Qwen/Qwen3-8B",
        "api_key": BODY_KEY,
        "max_tokens": 64,
        "headers": {"Authorization": f"Bearer {AUTH}", "x-api-key": XKEY, "Cookie": f"sid={COOKIE}"},
        "metadata": {"password": PASSWORD, "trace": BEARER},
        "messages": [
            {"role": "system", "content": f"key {SK_MESSAGE} follows"},
            {"role": "user", "content": f"my pass phrase is {PHRASE}"},
        ],
        "tools": [tool],
    }
    good = {
        "id": "secret-1",
        "route": "chat.completions",
        "headers": {"Authorization": f"Bearer {AUTH}", "x-api-key": XKEY, "Cookie": COOKIE},
        "api_key": BODY_KEY,
        "request": request,
        "response": {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": f"ok {PHRASE}"}}]},
        "server": {"prompt": f"<|im_start|>system key {SK_PROMPT}", "output_text": f"using {SK_PROMPT} now"},
    }
    stream = dict(good, id="secret-2", response=None, stream=[
        {"choices": [{"index": 0, "delta": {"content": f"echo {PHRASE}"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "login", "arguments": '{"token": "%s"}' % PHRASE}}]}, "finish_reason": "tool_calls"}]},
        "[DONE]",
    ])
    anthropic = {"id": "secret-3", "route": "messages", "model": "claude", "request": {
        "model": "claude", "system": f"sys {PHRASE}", "x-api-key": XKEY,
        "messages": [{"role": "user", "content": [{"type": "text", "text": f"text {PHRASE}"}]}]},
        "response": {"content": [{"type": "text", "text": PHRASE}], "stop_reason": "end_turn"}}
    bad = ('{"id": "bad", "route": "chat.completions", "headers": {"Authorization": "%s", "x-api-key": "%s"}, '
           '"api_key": "%s", "key": "%s", "request": {' % (AUTH, XKEY, BODY_KEY, SK_BAD_LINE))
    bad_route = {"id": "bad-route", "route": SK_BAD_LINE, "request": {"messages": []}}
    return [orjson.dumps(good), orjson.dumps(stream), orjson.dumps(anthropic), bad.encode(), orjson.dumps(bad_route)]


def _write_v1_plain(d: Path) -> None:
    (d / "v1.jsonl").write_bytes(b"\n".join(_v1_records()) + b"\n")


def _write_v1_zst(d: Path) -> None:
    (d / "v1.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(b"\n".join(_v1_records()) + b"\n"))


def _write_v1_gz(d: Path) -> None:
    (d / "v1.jsonl.gz").write_bytes(gzip.compress(b"\n".join(_v1_records()) + b"\n"))


def _request(model: str = "Qwen/Qwen3-8B") -> dict:
    """A Chat Completions request carrying secrets in its envelope and the phrase in its messages."""
    return {
        "model": model,
        "api_key": BODY_KEY,
        "max_tokens": 64,
        "headers": {"Authorization": f"Bearer {AUTH}", "x-api-key": XKEY, "Cookie": f"sid={COOKIE}"},
        "metadata": {"password": PASSWORD, "trace": BEARER},
        "messages": [
            {"role": "system", "content": f"key {SK_MESSAGE} follows"},
            {"role": "user", "content": f"my pass phrase is {PHRASE}"},
        ],
        "tools": [{"type": "function", "function": {"name": "login", "parameters": {"type": "object", "properties": {
            "token": {"type": "string", "default": JWT_TOOL}, "token_budget": {"type": "integer"}}}}}],
    }


def _chat_response(text: str) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "Qwen/Qwen3-8B",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}


_BAD = ('{"id": "bad", "headers": {"Authorization": "%s", "x-api-key": "%s"}, "api_key": "%s", "key": "%s", "request": {'
        % (AUTH, XKEY, BODY_KEY, SK_BAD_LINE)).encode()


def _write_sse(d: Path) -> None:
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "Qwen/Qwen3-8B",
             "choices": [{"index": 0, "delta": {"content": f"echo {PHRASE}"}, "finish_reason": "stop"}]}
    text = (
        f": request {json.dumps(_request())}\n"
        f": authorization: Bearer {AUTH}\n"
        f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
        f'data: {{"choices": [{{"delta": {{"content": "{SK_BAD_LINE}"}}, "api_key": "{BODY_KEY}"\n\ndata: [DONE]\n\n'
    )
    (d / "stream.sse").write_text(text, encoding="utf-8")


def _write_body(d: Path) -> None:
    (d / "answer.json").write_text(json.dumps(_chat_response(f"ok {PHRASE}"), indent=2), encoding="utf-8")
    (d / "answer.request.json").write_text(json.dumps(_request()), encoding="utf-8")


def _write_batch(d: Path) -> None:
    inp = [{"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions", "body": _request("gpt-4.1-mini")}]
    out = [{"id": "b1", "custom_id": "r1", "response": {"status_code": 200, "request_id": "x",
            "body": _chat_response(f"ok {PHRASE}")}, "error": None}]
    (d / "batch-input.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in inp) + _BAD + b"\n")
    (d / "batch-output.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in out))


def _write_har(d: Path) -> None:
    headers = [{"name": "Authorization", "value": f"Bearer {AUTH}"}, {"name": "x-api-key", "value": XKEY},
               {"name": "Cookie", "value": f"sid={COOKIE}"}, {"name": "Content-Type", "value": "application/json"}]
    entry = {
        "startedDateTime": "2026-11-30T10:00:00.000Z", "time": 1,
        "request": {"method": "POST", "url": f"https://gw.example.test/v1/chat/completions?api_key={BODY_KEY}",
                    "httpVersion": "HTTP/1.1", "headers": headers, "queryString": [{"name": "api_key", "value": BODY_KEY}],
                    "cookies": [{"name": "sid", "value": COOKIE}], "headersSize": -1, "bodySize": -1,
                    "postData": {"mimeType": "application/json", "text": json.dumps(_request())}},
        "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1",
                     "headers": [{"name": "Set-Cookie", "value": f"sid={COOKIE}"}], "cookies": [],
                     "content": {"size": 1, "mimeType": "application/json", "text": json.dumps(_chat_response(f"ok {PHRASE}"))},
                     "redirectURL": "", "headersSize": -1, "bodySize": -1},
        "cache": {}, "timings": {"send": 1, "wait": 1, "receive": 1},
    }
    bad = json.loads(json.dumps(entry))
    bad["request"]["postData"]["text"] = '{"api_key": "%s", "key": "%s", "messages": [' % (BODY_KEY, SK_BAD_LINE)
    har = {"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": [entry, bad]}}
    (d / "gateway.har").write_text(json.dumps(har, indent=1), encoding="utf-8")


def _write_serverlog(d: Path) -> None:
    rec = {"request_id": "srv-1", "model": "Qwen/Qwen3-8B", "request": _request(),
           "headers": {"Authorization": f"Bearer {AUTH}"}, "prompt": f"<|im_start|>system key {SK_PROMPT}",
           "output_text": f"using {SK_PROMPT} now", "steps": ["using ", SK_PROMPT, " now"]}
    (d / "server-log.jsonl").write_bytes(orjson.dumps(rec) + b"\n" + _BAD + b"\n")


def _write_litellm(d: Path) -> None:
    req = _request("gpt-4.1-mini")
    rec = {"request_id": "ll-1", "call_type": "acompletion", "model": "gpt-4.1-mini", "startTime": "2026-11-30T10:00:00Z",
           "spend": 0.1, "api_key": BODY_KEY, "metadata": {"user_api_key": XKEY, "headers": {"authorization": f"Bearer {AUTH}"}},
           "messages": json.dumps(req["messages"]), "proxy_server_request": json.dumps(req),
           "response": json.dumps(_chat_response(f"ok {PHRASE}"))}
    (d / "litellm-spend.jsonl").write_bytes(orjson.dumps(rec) + b"\n" + _BAD + b"\n")


def _write_otel(d: Path) -> None:
    def attr(k: str, v: str) -> dict:
        return {"key": k, "value": {"stringValue": v}}

    req = _request("gpt-4.1")
    span = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "chat gpt-4.1", "kind": 3,
            "startTimeUnixNano": "1764500000000000000", "endTimeUnixNano": "1764500001000000000", "attributes": [
                attr("gen_ai.operation.name", "chat"), attr("gen_ai.provider.name", "openai"), attr("gen_ai.request.model", "gpt-4.1"),
                attr("gen_ai.input.messages", json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"pass phrase {PHRASE}"}]}])),
                attr("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": f"ok {PHRASE}"}], "finish_reason": "stop"}])),
                attr("gen_ai.tool.definitions", json.dumps(req["tools"])),
                attr("http.request.header.authorization", f"Bearer {AUTH}"), attr("user.api_key", BODY_KEY), attr("x-api-key", XKEY)]}
    export = {"resourceSpans": [{"resource": {"attributes": [attr("service.name", "t")]}, "scopeSpans": [{"scope": {"name": "t"}, "spans": [span]}]}]}
    (d / "otel-spans.jsonl").write_bytes(orjson.dumps(export) + b"\n" + _BAD + b"\n")


#: capture format -> builder writing files with the planted secrets into a folder
FORMATS: dict[str, Callable[[Path], None]] = {
    "v1": _write_v1_plain,
    "v1-zst": _write_v1_zst,
    "v1-gz": _write_v1_gz,
    "sse": _write_sse,
    "body": _write_body,
    "openai-batch": _write_batch,
    "har": _write_har,
    "serverlog": _write_serverlog,
    "litellm": _write_litellm,
    "otel": _write_otel,
}


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "replay", *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc


def _haystacks(run: Path, proc: subprocess.CompletedProcess) -> dict[str, str]:
    """Every text a user could read from a run: each file as raw bytes, each Parquet decoded."""
    out = {"stdout": proc.stdout, "stderr": proc.stderr}
    files = [p for p in run.rglob("*") if p.is_file()]
    assert any(p.name == "exchanges.parquet" for p in files)
    for p in files:
        out[str(p)] = p.read_bytes().decode("utf-8", "replace")
        if p.suffix == ".parquet":
            out[f"{p} (decoded)"] = json.dumps(pq.read_table(p).to_pylist(), ensure_ascii=False, default=str)
    return out


def _found(haystacks: dict[str, str], secrets: list[str]) -> list[tuple[str, str]]:
    return [(s, where) for s in secrets for where, text in haystacks.items() if s in text]


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> Path:
    """One folder per capture format under one root, so each CLI command runs once over all."""
    root = tmp_path_factory.mktemp("captures")
    for name, build in FORMATS.items():
        (root / name).mkdir()
        build(root / name)
    return root


def _control(run: Path, root: Path) -> None:
    """Without --redact message text is kept: each format's rows do hold the planted phrase, so
    the search reaches what each reader wrote."""
    rows = pq.read_table(run / "exchanges.parquet").to_pylist()
    for name in FORMATS:
        mine = [r for r in rows if Path(r["source_file"]).is_relative_to(root / name)]
        assert mine, f"{name}: no exchange ingested"
        assert any(PHRASE in json.dumps(r, ensure_ascii=False, default=str) for r in mine), name


def test_audit_keeps_no_secret(captures: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _cli("audit", str(captures), "--out", str(run), "--quiet")
    hay = _haystacks(run, proc)
    assert _found(hay, ALWAYS) == []
    _control(run, captures)
    # reports redact message text by default: only the tables hold it without --redact
    reports = {k: v for k, v in hay.items() if k in ("stdout", "stderr") or not k.endswith(".parquet") and ".parquet " not in k}
    assert _found(reports, [PHRASE, SK_MESSAGE]) == []
    assert "Secrets dropped at ingest:" in proc.stdout and "Secrets dropped at ingest:" in (run / "report.md").read_text()
    meta = json.loads((run / "run.json").read_text())
    assert meta["ingest"]["redactions"]["name"] >= 5 * len(FORMATS)
    assert meta["ingest"]["errors"] >= len(FORMATS)  # the bad records (their excerpts were searched too)


def test_audit_redact_keeps_no_message_text(captures: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _cli("audit", str(captures), "--out", str(run), "--quiet", "--redact")
    assert _found(_haystacks(run, proc), ALWAYS + MESSAGE_ONLY + [SK_MESSAGE]) == []
    meta = json.loads((run / "run.json").read_text())
    assert meta["ingest"]["redactions"]["hashed"] >= 5 * len(FORMATS) and meta["options"]["redact"] is True
    assert "`--redact`:" in (run / "report.md").read_text()


def test_ingest_command_keeps_no_secret(captures: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _cli("ingest", str(captures), "--out", str(run))  # prints the ingest errors table
    assert "ingest errors" in proc.stdout
    assert _found(_haystacks(run, proc), ALWAYS) == []
    _control(run, captures)


def test_planted_bug_no_redaction_leaks_in_every_format(captures: Path, tmp_path: Path, monkeypatch) -> None:
    """The search can fail: with the redaction disabled (the planted bug), every format's rows hold
    planted secrets, so the tests above would catch a reader whose rows skipped redaction."""
    from replay.capture import ingest, redact

    monkeypatch.setattr(redact, "redact_exchange", lambda *a, **k: None)
    out = tmp_path / "out"
    ingest(captures, out)
    rows = pq.read_table(out / "exchanges.parquet").to_pylist()
    for name in FORMATS:
        text = json.dumps([r for r in rows if Path(r["source_file"]).is_relative_to(captures / name)], ensure_ascii=False, default=str)
        assert [s for s in ALWAYS if s in text], f"{name}: nothing planted reaches the tables"


def test_redact_and_exemplar_text_together_is_a_usage_error(captures: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from replay.cli import app

    result = CliRunner().invoke(app, ["audit", str(captures / "v1"), "--out", str(tmp_path / "run"), "--redact", "--exemplar-text", "-q"])
    assert result.exit_code == 2
    assert not (tmp_path / "run").exists()
