"""The one fake server of the capture-fixture generators (tests/writers/fake_openai.py): what it
sends for a script is what :func:`answer_of` reads back from its record, on every route it serves."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.writers.fake_openai import CREATED, EXCHANGES, FakeOpenAI, answer_of


def _post(url: str, body: dict) -> bytes:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read()


def _sse(data: bytes) -> list[dict]:
    events = [ln[len(b"data: "):] for ln in data.split(b"\n\n") if ln.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_script_answers_streamed_whole_and_as_anthropic_messages() -> None:
    """A call answer streamed without scripted pieces (it streamed no call at all: the calls were
    cut only by ``pieces``), the same answer whole, and as an Anthropic message; the model is the
    request's; a request past the script is 404 and not recorded."""
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    answer = {"content": None, "tool_calls": [call]}
    with FakeOpenAI([{"answer": answer}] * 3 + [{"answer": {"content": "Hi there."}}]) as server:
        stream = _sse(_post(server.base_url + "/chat/completions", {"model": "m-1", "messages": [], "stream": True}))
        whole = json.loads(_post(server.base_url + "/chat/completions", {"model": "m-2", "messages": []}))
        message = json.loads(_post(server.origin + "/v1/messages", {"model": "claude-x", "max_tokens": 5, "messages": []}))
        text = _sse(_post(server.base_url + "/chat/completions", {"model": "m-1", "messages": [], "stream": True}))
        with pytest.raises(urllib.error.HTTPError) as past:
            _post(server.base_url + "/chat/completions", {"model": "m-1", "messages": []})
        records = server.expected()
    assert past.value.code == 404 and len(records) == 4
    assert [r["exchange"] for r in records] == [1, 2, 3, 4]
    assert records[0]["stream"] == stream and records[1]["response"] == whole and records[2]["response"] == message
    want = (None, [("call_1", "get_weather", {"city": "Oslo"})], "tool_calls")
    assert answer_of(records[0]) == answer_of(records[1]) == want
    assert [c["choices"][0]["delta"].get("tool_calls", [{}])[0].get("function", {}).get("arguments") for c in stream] == [
        None, "", '{"city":', ' "Oslo"}', None]
    assert {c["model"] for c in stream} == {"m-1"} and whole["model"] == "m-2" and whole["created"] == CREATED
    assert message["model"] == "claude-x" and message["stop_reason"] == "tool_use" and message["id"] == "msg_fx3"
    assert message["content"] == [{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}]
    assert answer_of(records[3]) == ("Hi there.", [], "stop")
    assert [c["choices"][0]["delta"].get("content") for c in text] == ["", "Hi t", "here.", None]


def test_the_scripted_pieces_are_the_deltas_sent() -> None:
    """:data:`EXCHANGES`' streamed answers are cut as their ``pieces`` say."""
    with FakeOpenAI() as server:
        for ex in EXCHANGES:
            _post(server.base_url + "/chat/completions", ex["request"])
        records = server.expected()
    for ex, rec in zip(EXCHANGES, records):
        answer = ex["answer"]
        calls = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in answer["tool_calls"]]
        assert answer_of(rec) == (answer["content"], calls, answer["finish_reason"])
    parts = [d["function"]["arguments"] for c in records[2]["stream"] for d in c["choices"][0]["delta"].get("tool_calls", [])]
    assert parts == ["", *EXCHANGES[2]["pieces"][0], "", *EXCHANGES[2]["pieces"][1]]
