"""Harmony against its reference: ``openai_harmony``'s ``StreamableParser`` (the parser vLLM's gpt-oss
path feeds token ids to) is the oracle for every well-formed gpt-oss completion.

A completion is drawn as a sequence of messages (the first one after the prompt's
``<|start|>assistant``, so it starts at ``<|channel|>``): analysis, commentary preambles, final
answers, and calls to ``functions.NAME`` with the recipient in the role part or after the channel
and any content type. The text is tokenized with the o200k Harmony encoding (rebuilt offline from
quicktok-v1, :func:`replay.render.harmony.harmony_vocab_dir`); the oracle's messages, mapped by the
module's rules (analysis -> reasoning, a ``functions.`` recipient -> a call with the body's JSON,
other channels -> content), must equal the whole-text parse and the stream under the token
chunking (each delta the text one more token adds, as a server's detokenizer streams it).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("openai_harmony")
pytest.importorskip("quicktok")

from replay.parsers.base import ToolCall  # noqa: E402
from replay.parsers.harmony import CALL, CHANNEL, CONSTRAIN, END, MESSAGE, RETURN, START, HarmonyParser  # noqa: E402
from replay.stream import replay_stream  # noqa: E402


@pytest.fixture(scope="module")
def encoding():
    import openai_harmony as oh

    from replay.render.harmony import harmony_vocab_dir

    harmony_vocab_dir()
    return oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)


body_text = st.text(st.characters(codec="utf-8", exclude_characters="<\x00"), min_size=1, max_size=30)
names = st.sampled_from(["get_weather", "f", "a.b", "lookup_x", "search"])
objects = st.dictionaries(st.sampled_from(["city", "n", "q", "é"]), st.one_of(st.integers(-99, 99), st.text(max_size=8), st.booleans()), max_size=3)


@st.composite
def message(draw):
    kind = draw(st.sampled_from(["analysis", "preamble", "final", "call", "call"]))
    if kind == "call":
        name = draw(names)
        ctype = draw(st.sampled_from([f" {CONSTRAIN}json", f"{CONSTRAIN}json", " json", ""]))
        if draw(st.booleans()):
            head = f" to=functions.{name}{CHANNEL}commentary{ctype}"
        else:
            head = f"{CHANNEL}commentary to=functions.{name}{ctype}"
        args = draw(objects)
        return head, json.dumps(args, ensure_ascii=draw(st.booleans())), CALL, ToolCall(name, json.dumps(args, ensure_ascii=False))
    channel = {"analysis": "analysis", "preamble": "commentary", "final": "final"}[kind]
    return f"{CHANNEL}{channel}", draw(body_text), (RETURN if kind == "final" else END), None


@st.composite
def completions(draw):
    msgs = draw(st.lists(message(), min_size=1, max_size=4))
    text = ""
    for k, (head, body, term, _) in enumerate(msgs):
        if k:
            text += START + "assistant"
        text += head + MESSAGE + body + term
    return text


def oracle(encoding, tokens):
    """``(content, calls, reasoning)`` of the oracle's messages for completion ``tokens``."""
    import openai_harmony as oh

    parser = oh.StreamableParser(encoding, role=oh.Role.ASSISTANT)
    for t in tokens:
        parser.process(t)
    content, reasoning, calls = [], [], []
    for m in parser.messages:
        text = "".join(c.text for c in m.content)
        if m.recipient and m.recipient.startswith("functions."):
            calls.append(ToolCall(m.recipient[len("functions.") :], json.dumps(json.loads(text), ensure_ascii=False)))
        elif m.recipient:
            continue
        elif m.channel == "analysis":
            reasoning.append(text)
        else:
            content.append(text)
    return "".join(content), tuple(calls), "".join(reasoning)


def token_deltas(encoding, tokens):
    """The text each token adds, as an incremental detokenizer streams it (a token that ends
    inside a UTF-8 sequence waits for the next)."""
    deltas, done = [], ""
    for k in range(1, len(tokens) + 1):
        text = encoding.decode(tokens[:k])
        if text.endswith("\ufffd") and k < len(tokens):
            continue
        deltas.append(text[len(done) :])
        done = text
    return deltas


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(completions())
def test_harmony_matches_openai_harmony_streamable_parser(encoding, text):
    tokens = encoding.encode(text, allowed_special="all")
    content, calls, reasoning = oracle(encoding, tokens)
    got = HarmonyParser().parse(text)
    assert (got.content, got.calls, got.reasoning) == (content, calls, reasoning)
    deltas = token_deltas(encoding, tokens)
    assert "".join(deltas) == text
    streamed = replay_stream(HarmonyParser, None, deltas)
    assert streamed.content == content and streamed.reasoning == reasoning
    assert [(c.name, c.arguments) for c in streamed.calls] == [(c.name, c.arguments) for c in calls]
