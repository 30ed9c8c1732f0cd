"""The served side from the stream alone: planted faults per API, the columns of v1 lines with
embedded streams, SQL counts, and a property: an OpenAI chat SSE transcript generated from calls,
split at arbitrary points, assembles back to those calls."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypo import examples

from replay.capture import ingest
from replay.capture.served import (
    call_markers,
    check_chat_stream,
    check_messages_stream,
    check_responses_stream,
    check_served,
    markup_in,
)
from replay.capture.sse import events_from_lines, records_from_events
from replay.capture.v1 import assemble_chat_stream, parse_record
from replay.sql import connect, run_query


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {"object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def tc(index, name=None, args=None, id_=None) -> dict:
    fn = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    out = {"function": fn}
    if index is not None:
        out["index"] = index
    if id_ is not None:
        out["id"] = id_
    return out


def calls_stream(*entries) -> list[dict]:
    return [chunk({"tool_calls": [e]}) for e in entries]


# --------------------------------------------------------------------------- OpenAI chat, by index


def test_chat_clean_stream_has_no_fault() -> None:
    s = calls_stream(tc(0, "a", "", "c0"), tc(0, None, "{}"), tc(1, "b", "{", "c1"), tc(1, None, "}"))
    assert check_chat_stream(s) == (0, 0)


def test_chat_name_sent_twice() -> None:
    s = calls_stream(tc(0, "a", "{", "c0"), tc(0, "a", "}"))
    assert check_chat_stream(s) == (1, 0)
    # an empty name on a later delta is not a second name (servers send "" there)
    assert check_chat_stream(calls_stream(tc(0, "a", "{"), tc(0, "", "}"))) == (0, 0)


@pytest.mark.parametrize(
    "entries, faults",
    [
        ((tc(1, "a", "{}"),), 1),  # skips index 0
        ((tc(0, "a", "{}"), tc(2, "b", "{}")), 1),  # skips index 1
        ((tc(0, "a", "{"), tc(1, "b", "{"), tc(0, None, "}")), 1),  # goes back to 0 after 1 opened
        ((tc(None, "a", "{}"),), 1),  # no index
        ((tc(0, "a", "{}"), tc(1, "b", "{}"), tc(2, "c", "{}")), 0),
    ],
)
def test_chat_indices_out_of_order(entries, faults) -> None:
    assert check_chat_stream(calls_stream(*entries))[1] == faults


def test_chat_stop_with_calls_and_non_json() -> None:
    s = calls_stream(tc(0, "a", "{\"x\": "), tc(1, "b", "{}")) + [chunk({}, "stop")]
    content, calls, finish = assemble_chat_stream(s)
    got = check_served("chat.completions", "Qwen/Qwen3-8B", s, content, calls, finish)
    assert got == {"served_non_json_calls": 1, "served_name_repeats": 0, "served_index_faults": 0,
                   "served_markup": None, "served_stop_with_calls": True}
    ok = s[:-1] + [chunk({}, "tool_calls")]
    assert check_served("chat.completions", "m", ok, *assemble_chat_stream(ok))["served_stop_with_calls"] is False


# --------------------------------------------------------------------------- markup, per family


def test_markup_in_content_by_family() -> None:
    assert markup_in('Sure <tool_call>{"name": "a"}', "Qwen/Qwen3-8B") == "<tool_call>"
    assert markup_in("plain answer", "Qwen/Qwen3-8B") is None
    # reasoning markers are not call markup
    assert "<think>" not in call_markers("Qwen/Qwen3-Coder-30B-A3B-Instruct")
    assert markup_in("<think>hm</think>ok", "Qwen/Qwen3-Coder-30B-A3B-Instruct") is None
    # a Mistral model: its own marker; a Hermes marker is not its markup
    assert markup_in("x [TOOL_CALLS]get[ARGS]{}", "mistralai/Mistral-Small-3.2-24B-Instruct-2506") == "[TOOL_CALLS]"
    assert markup_in("x <tool_call>", "mistralai/Mistral-Small-3.2-24B-Instruct-2506") is None
    # an unknown model: any family's marker, the first in the text
    assert markup_in("a <|tool_call_begin|> b <tool_call>", "my-model") == "<|tool_call_begin|>"


# --------------------------------------------------------------------------- Anthropic, per block


def ev_start(i, kind="tool_use", name="f") -> dict:
    cb = {"type": kind, "id": f"t{i}", "name": name, "input": {}} if kind == "tool_use" else {"type": "text", "text": ""}
    return {"type": "content_block_start", "index": i, "content_block": cb}


def ev_json(i, s) -> dict:
    return {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": s}}


def ev_stop(i) -> dict:
    return {"type": "content_block_stop", "index": i}


def test_messages_stream_without_message_start_is_a_client_error() -> None:
    """The Anthropic SDK raises on a first event other than message_start: that is what the client
    got (no message), recorded in served_client_error."""
    rec = {"route": "messages", "request": {"model": "claude-x"}, "stream": [ev_start(0), ev_json(0, "{}"), ev_stop(0)]}
    row, _ = parse_record(rec, "f", 1, "sse")
    assert row["served_client_error"] == 'RuntimeError: Unexpected event order, got content_block_start before "message_start"'
    assert row["served_tool_calls"] == []


def test_messages_checks() -> None:
    clean = [ev_start(0, "text"), ev_stop(0), ev_start(1), ev_json(1, "{}"), ev_stop(1)]
    assert check_messages_stream(clean) == (0, 0)
    twice = [ev_start(0), ev_json(0, "{"), ev_start(0, name="g"), ev_json(0, "}"), ev_stop(0)]
    assert check_messages_stream(twice) == (1, 1)
    skip = [ev_start(0, "text"), ev_stop(0), ev_start(2), ev_json(2, "{}"), ev_stop(2)]
    assert check_messages_stream(skip) == (0, 1)
    after_stop = [ev_start(0), ev_json(0, "{}"), ev_stop(0), ev_json(0, " ")]
    assert check_messages_stream(after_stop) == (0, 1)
    unopened = [ev_json(3, "{}")]
    assert check_messages_stream(unopened) == (0, 1)
    start = {"type": "message_start", "message": {"content": [], "stop_reason": None, "usage": {"output_tokens": 1}}}
    events = [start, *clean, {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}]
    rec = {"route": "messages", "request": {"model": "claude-x"}, "stream": events}
    row, _ = parse_record(rec, "f", 1, "sse")
    assert row["served_client_error"] is None
    assert (row["served_stop_with_calls"], row["served_name_repeats"], row["served_index_faults"]) == (True, 0, 0)


# --------------------------------------------------------------------------- Responses, per item


def test_responses_checks() -> None:
    def added(i, t="function_call"):
        return {"type": "response.output_item.added", "output_index": i, "item": {"type": t, "call_id": f"c{i}", "name": "f"}}

    def delta(i, d):
        return {"type": "response.function_call_arguments.delta", "output_index": i, "delta": d}

    def done(i):
        return {"type": "response.output_item.done", "output_index": i, "item": {}}

    assert check_responses_stream([added(0, "message"), done(0), added(1), delta(1, "{}"), done(1)]) == (0, 0)
    assert check_responses_stream([added(0), delta(0, "{"), added(0), delta(0, "}")]) == (1, 1)
    assert check_responses_stream([added(1), delta(1, "{}")]) == (0, 1)
    assert check_responses_stream([added(0), done(0), delta(0, "{}")]) == (0, 1)
    assert check_responses_stream([delta(5, "{}")]) == (0, 1)


# --------------------------------------------------------------------------- end to end, SQL


def test_served_columns_and_sql_counts(tmp_path: Path) -> None:
    """v1 lines with embedded streams get the columns too; served_checks counts them."""
    def v1(xid, stream, model="Qwen/Qwen3-8B"):
        return json.dumps({"id": xid, "route": "chat.completions", "request": {"model": model, "stream": True}, "stream": stream})

    lines = [
        v1("ok", calls_stream(tc(0, "a", "{}")) + [chunk({}, "tool_calls"), "[DONE]"]),
        v1("twice", calls_stream(tc(0, "a", "{"), tc(0, "a", "}")) + [chunk({}, "tool_calls")]),
        v1("order", calls_stream(tc(1, "a", "{}")) + [chunk({}, "tool_calls")]),
        v1("markup", [chunk({"content": "<tool_call>{\"name\": \"a\"}"}), chunk({}, "stop")]),
        v1("stop", calls_stream(tc(0, "a", "{}")) + [chunk({}, "stop")]),
        v1("nonjson", calls_stream(tc(0, "a", "")) + [chunk({}, "tool_calls")]),
    ]
    src = tmp_path / "c.jsonl"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    ingest(src, out)
    rows = {r["exchange_id"]: r for r in pq.read_table(out / "exchanges.parquet").to_pylist()}
    assert rows["twice"]["served_name_repeats"] == 1
    assert rows["order"]["served_index_faults"] == 1
    assert rows["markup"]["served_markup"] == "<tool_call>"
    assert rows["stop"]["served_stop_with_calls"] is True
    assert rows["nonjson"]["served_non_json_calls"] == 1
    assert all(r["capture_format"] == "v1" for r in rows.values())
    got = run_query(connect(out), "served_checks").to_pylist()
    assert got == [{"capture_format": "v1", "route": "chat.completions", "exchanges": 6, "served": 6, "streamed": 6, "calls": 5,
                    "non_json_calls": 1, "name_repeats": 1, "index_faults": 1, "markup_in_content": 1, "stop_with_calls": 1}]


# --------------------------------------------------------------------------- property


names = st.text(alphabet="abcdefghij_", min_size=1, max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
call_lists = st.lists(st.tuples(names, st.dictionaries(st.text(max_size=6), json_values, max_size=4)), min_size=1, max_size=4)


@settings(max_examples=examples(150), deadline=None)
@given(calls=call_lists, data=st.data())
def test_chat_transcript_split_anywhere_assembles_back(calls, data) -> None:
    """Calls -> an OpenAI chat SSE transcript whose arguments are split at arbitrary points (and
    whose content precedes them) -> read back by the transcript reader and assembled by index:
    the same names and the same arguments, no served fault."""
    payloads = [chunk({"role": "assistant", "content": ""})]
    for i, (name, args) in enumerate(calls):
        text = json.dumps(args, ensure_ascii=False)
        cuts = sorted(set(data.draw(st.lists(st.integers(0, len(text)), max_size=6))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        payloads.append(chunk({"tool_calls": [tc(i, name, pieces[0], f"call_{i}")]}))
        payloads += [chunk({"tool_calls": [tc(i, None, p)]}) for p in pieces[1:]]
    payloads.append(chunk({}, "tool_calls"))
    transcript = "".join(f"data: {json.dumps(p, ensure_ascii=False)}\n\n" for p in payloads) + "data: [DONE]\n\n"
    lines = [(n + 1, 0, ln.encode()) for n, ln in enumerate(transcript.split("\n"))]
    recs = list(records_from_events(events_from_lines(lines)))
    assert len(recs) == 1
    row, _ = parse_record(recs[0][2], "t.sse", 1, "sse")
    got = [(c["name"], json.loads(c["arguments"])) for c in row["served_tool_calls"]]
    assert got == [(n, a) for n, a in calls]
    assert [c["index"] for c in row["served_tool_calls"]] == list(range(len(calls)))
    assert (row["served_name_repeats"], row["served_index_faults"], row["served_non_json_calls"], row["served_stop_with_calls"]) == (0, 0, 0, False)
