"""replay.assemble against the SDKs themselves (tests/sdk_oracle.py): the same streams give the
same client outcome, a snapshot or the exception the SDK raises.

Streams: every stream of samples/ (v1 lines' ``stream``, the SSE transcripts), every SSE file of
../shared/corpus/captures (skipped when absent), and hypothesis-generated chunk sequences with the
faults servers make: a name repeated, an index skipped or reversed, arguments split anywhere, a
fragment for a call never opened, ``type`` or ``id`` missing, an id changed, no ``function``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hypo import examples

from replay.assemble import ClientResult, assemble_chat, assemble_events, assemble_messages, chunks_from_events
from replay.parsers.base import CallDelta, StreamDelta

pytest.importorskip("openai")
pytest.importorskip("anthropic")
from sdk_oracle import anthropic_snapshot, normal, openai_snapshot  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "captures"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/corpus/captures")


def sse_payloads(text: str) -> list[dict]:
    """The JSON ``data:`` payloads of an SSE transcript, in order (``[DONE]`` and non-JSON left out)."""
    out, data = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line.strip() and data:
            body = "\n".join(data)
            data = []
            if body.strip() == "[DONE]":
                continue
            try:
                obj = json.loads(body)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def _lines(path: Path) -> list[str]:
    raw = path.read_bytes()
    if path.suffix == ".zst":
        raw = zstandard.ZstdDecompressor().stream_reader(raw).read()
    return raw.decode("utf-8", "replace").splitlines()


def sample_streams() -> list[tuple[str, str, list[dict]]]:
    """``(label, route, payloads)`` of every stream in samples/ and the shared corpus."""
    out = []
    for path in sorted((ROOT / "samples").glob("*.jsonl*")):
        for no, line in enumerate(_lines(path), 1):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("stream"), list):
                payloads = []
                for p in rec["stream"]:
                    if isinstance(p, str):
                        p = p.strip().removeprefix("data:").strip()
                        if p == "[DONE]":
                            continue
                        p = json.loads(p)
                    payloads.append(p)
                out.append((f"{path.name}:{no}", rec.get("route"), payloads))
    for path in sorted((ROOT / "samples" / "formats").glob("*.sse")):
        payloads = sse_payloads(path.read_text(encoding="utf-8"))
        route = "messages" if any(p.get("type") == "message_start" for p in payloads) else (
            "responses" if any(str(p.get("type", "")).startswith("response.") for p in payloads) else "chat.completions"
        )
        out.append((path.name, route, payloads))
    if CORPUS.is_dir():
        for path in sorted(CORPUS.rglob("*")):
            if path.is_file():
                route = "messages" if "anthropic" in path.parent.name else "chat.completions"
                out.append((f"corpus/{path.parent.name}/{path.name}", route, sse_payloads(path.read_text(encoding="utf-8", errors="replace"))))
    return out


STREAMS = sample_streams()


def test_the_streams_are_there():
    routes = [r for _, r, _ in STREAMS]
    assert routes.count("chat.completions") >= 19 and routes.count("messages") >= 1
    if CORPUS.is_dir():
        assert sum(1 for label, _, _ in STREAMS if label.startswith("corpus/")) == 22


@pytest.mark.parametrize("label, route, payloads", [s for s in STREAMS if s[1] in ("chat.completions", "messages")], ids=lambda v: v if isinstance(v, str) else "")
def test_every_captured_stream_assembles_as_the_sdk_does(label, route, payloads):
    if route == "chat.completions":
        assert normal(assemble_chat(payloads)) == openai_snapshot(payloads), label
    else:
        assert normal(assemble_messages(payloads)) == anthropic_snapshot(payloads), label


def test_a_repeated_name_is_concatenated_as_the_sdk_does():
    def chunk(tc, fr=None):
        return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [tc]}, "finish_reason": fr}]}

    chunks = [
        chunk({"index": 0, "id": "call_1", "type": "function", "function": {"name": "find", "arguments": ""}}),
        chunk({"index": 0, "function": {"name": "find", "arguments": '{"q": 1}'}}, "tool_calls"),
    ]
    got = assemble_chat(chunks)
    assert (got.calls[0].name, got.calls[0].names_sent, got.error) == ("findfind", 2, None)
    assert normal(got) == openai_snapshot(chunks)


@pytest.mark.parametrize("index", [2**63, 10**20, -(10**20)])
def test_a_call_index_beyond_the_machine_is_the_sdks_error(index):
    """An index the SDK's ``list.insert`` cannot take raises OverflowError in the SDK: a client
    error of the stream, not an ingest internal-error (found by a new-user pass)."""
    chunks = [{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, "finish_reason": None}]}]
    got = assemble_chat(chunks)
    assert normal(got) == openai_snapshot(chunks)
    assert got.error.startswith("OverflowError: ")


# ------------------------------------------------------------------------------- generated streams

NAMES = st.sampled_from(["find", "read", "bash", "é"])
ARGS = st.sampled_from(['{"q": "x"}', '{"path": "a/b.py", "n": [1, 2]}', "{}", '{"s": "\\u00e9 \\"q\\""}', "not json", '{"a": 1'])


@st.composite
def chat_chunks(draw) -> list[dict]:
    """Chunk sequences a (faulty) server may send: calls whose arguments are split anywhere, with
    each fault drawn independently."""
    n = draw(st.integers(0, 3))
    entries: list[tuple[int, dict]] = []  # (call, entry) in send order
    for i in range(n):
        name, args = draw(NAMES), draw(ARGS)
        cuts = sorted(set(draw(st.lists(st.integers(0, len(args)), max_size=4))))
        pieces = [args[a:b] for a, b in zip([0, *cuts], [*cuts, len(args)])]
        first = {"index": i, "function": {"name": name, "arguments": pieces[0]}}
        if not draw(st.booleans()) or draw(st.booleans()):
            first["id"] = f"call_{i}"
        if draw(st.integers(0, 4)):
            first["type"] = "function"
        entries.append((i, first))
        for p in pieces[1:]:
            e: dict = {"index": i, "function": {"arguments": p}}
            fault = draw(st.integers(0, 12))
            if fault == 0:
                e["function"]["name"] = name  # name repeated
            elif fault == 1:
                e["id"] = f"call_{i}b"  # id changed
            elif fault == 2:
                e["index"] = i + 1 + draw(st.integers(0, 2))  # fragment for a call never opened
            elif fault == 3:
                del e["function"]  # no function
            elif fault == 4:
                e["type"] = draw(st.sampled_from(["function", "custom"]))
            entries.append((i, e))
    if n >= 2 and draw(st.integers(0, 3)) == 0:  # reversed: the calls' indices swapped
        for _, e in entries:
            if e["index"] in (0, 1):
                e["index"] = 1 - e["index"]
    if n and draw(st.integers(0, 5)) == 0:  # skipped: every index shifted up
        for _, e in entries:
            e["index"] += 1
    chunks: list[dict] = [{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": draw(st.sampled_from([None, "", "Hi."]))}, "finish_reason": None}]}]
    k = 0
    while k < len(entries):
        take = draw(st.integers(1, 2))
        delta: dict = {"tool_calls": [e for _, e in entries[k : k + take]]}
        if draw(st.integers(0, 5)) == 0:
            delta["content"] = " more"
        chunks.append({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        k += take
    fr = draw(st.sampled_from(["tool_calls", "stop", "length", None]))
    chunks.append({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": fr}]})
    return chunks


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chat_chunks())
def test_generated_chat_streams_assemble_as_the_openai_sdk_does(chunks):
    assert normal(assemble_chat(chunks)) == openai_snapshot(chunks)


@st.composite
def message_events(draw) -> list[dict]:
    """Anthropic Messages event sequences: text and tool_use blocks, input JSON split anywhere,
    with faults (a delta for a block never started, a block started twice, no message_start,
    no usage on message_delta, invalid or truncated JSON)."""
    evs: list[dict] = []
    if draw(st.integers(0, 9)):
        msg: dict = {"id": "m", "type": "message", "role": "assistant", "content": [], "stop_reason": None}
        if draw(st.integers(0, 6)):
            msg["usage"] = {"input_tokens": 1, "output_tokens": 1}
        evs.append({"type": "message_start", "message": msg})
    n = draw(st.integers(0, 3))
    for i in range(n):
        if draw(st.booleans()):
            evs.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
            evs.append({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": "Hello"}})
        else:
            evs.append({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": f"toolu_{i}", "name": draw(NAMES), "input": {}}})
            if draw(st.integers(0, 6)) == 0:  # started twice
                evs.append(dict(evs[-1]))
            args = draw(ARGS)
            cuts = sorted(set(draw(st.lists(st.integers(0, len(args)), max_size=3))))
            for a, b in zip([0, *cuts], [*cuts, len(args)]):
                idx = i + (1 if draw(st.integers(0, 15)) == 0 else 0)
                evs.append({"type": "content_block_delta", "index": idx, "delta": {"type": "input_json_delta", "partial_json": args[a:b]}})
        if draw(st.integers(0, 5)):
            evs.append({"type": "content_block_stop", "index": i})
    if draw(st.integers(0, 4)):
        md: dict = {"type": "message_delta", "delta": {"stop_reason": draw(st.sampled_from(["tool_use", "end_turn", "max_tokens"])), "stop_sequence": None}}
        if draw(st.integers(0, 6)):
            md["usage"] = {"output_tokens": 5}
        evs.append(md)
        evs.append({"type": "message_stop"})
    return evs


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message_events())
def test_generated_messages_streams_assemble_as_the_anthropic_sdk_does(events):
    assert normal(assemble_messages(events)) == anthropic_snapshot(events)


# ------------------------------------------------------------------------------- replays


@st.composite
def parser_events(draw) -> list[StreamDelta]:
    """What a (faulty) tool parser may yield: names repeated, indices skipped or reversed,
    fragments before a call is named, ids of its own."""
    out = []
    for _ in range(draw(st.integers(0, 6))):
        calls = [
            CallDelta(index=draw(st.integers(0, 2)), name=draw(st.one_of(st.none(), NAMES, st.just(""))),
                      arguments=draw(st.sampled_from(["", "{", '"a": 1', "}"])), id=draw(st.sampled_from([None, None, "c1", "c2"])))
            for _ in range(draw(st.integers(0, 2)))
        ]
        out.append(StreamDelta(content=draw(st.sampled_from(["", "x"])), calls=calls, reasoning=draw(st.sampled_from(["", "", "r"]))))
    return out


@settings(max_examples=examples(500), deadline=None)
@given(parser_events())
def test_a_replay_is_the_sdk_assembly_of_the_chunks_a_server_sends(events):
    """assemble_events (computed without building the chunks) equals the SDK's snapshot of the
    chunks a server sends for the events, and the mirror's (assemble_chat) facts too."""
    got = assemble_events(events)
    assert isinstance(got, ClientResult)
    assert normal(got) == openai_snapshot(chunks_from_events(events))
    mirror = assemble_chat(chunks_from_events(events))
    if mirror.error is None:
        assert [(c.names_sent, c.ids_sent) for c in got.calls] == [(c.names_sent, c.ids_sent) for c in mirror.calls]
        assert (got.content, got.reasoning, got.saw_calls) == (mirror.content, mirror.reasoning, mirror.saw_calls)
