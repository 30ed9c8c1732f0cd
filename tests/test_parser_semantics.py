"""Parser semantics that match the serving stacks (issue 10, item 4), as properties over every
family that has the behaviour:

* end-of-turn / end-of-sequence tokens (each family's ``end_tokens``) never reach content, in the
  whole-text parse and streamed, however the deltas split them (streamed == whole under every
  chunking, ``char-raw`` and every two-way split included);
* the typing of text parameters by the declared type name (:mod:`replay.parsers._schema`, vLLM /
  SGLang ``_convert_param_value``), the same in both paths of every family that types by schema;
* ``"arguments"`` given as a JSON string is a call (Hermes, Granite 3 / 4, Llama 3 JSON, Mistral);
* a Mistral ``[TOOL_CALLS] [...]`` call list followed by text is the calls and then content.

Each property has a planted-bug twin showing the check catches the fault it targets.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from replay.parsers import (
    DeepSeekV32Parser,
    Glm45Parser,
    Granite4Parser,
    GraniteParser,
    HermesParser,
    Llama3JsonParser,
    MiniMaxM2Parser,
    MistralParser,
    Qwen3CoderParser,
    SeedOssParser,
    families,
)
from replay.parsers._markers import TokenStripper, check_prefix_free, strip_tokens
from replay.parsers._schema import convert_value
from replay.stream import check_stream_equals_whole, replay_stream, split
from hypo import budget
from strategies import all_chunkings, assert_property, text_with
from families.configs import SYNTAX

FAMILIES = families()
WITH_END_TOKENS = [c for c in FAMILIES if c.end_tokens]
QUICK = budget(25)


# ----------------------------------------------------------------------------- end tokens
def test_every_family_declares_its_end_tokens():
    """Every built-in family lists end tokens, prefix-free (one token at any position)."""
    assert WITH_END_TOKENS == FAMILIES
    for cls in FAMILIES:
        check_prefix_free(cls.end_tokens)


@pytest.mark.parametrize("cls", FAMILIES, ids=[c.name for c in FAMILIES])
def test_end_token_after_the_reply_is_not_content(cls):
    """A reply (text, a call, text) followed by each end token parses as the reply alone, whole
    and streamed under every chunking (the token split anywhere)."""
    call = SYNTAX[cls.name][0].normal
    body = f"Let me check. {call} done"
    want = cls().parse(body)
    for tok in cls.end_tokens:
        text = body + tok
        got = cls().parse(text)
        assert (got.content, got.calls) == (want.content, want.calls), (tok, got)
        assert tok not in got.content
        assert_property(cls, text)
        for ch in ("char-raw", "fixed-2"):
            streamed = replay_stream(cls, None, split(text, ch, markers=cls.markers))
            assert tok not in streamed.content and streamed.content == want.content, (tok, ch)


@pytest.mark.parametrize("cls", FAMILIES, ids=[c.name for c in FAMILIES])
def test_qwen_style_end_token_in_reasoning_and_before_a_call(cls):
    """An end token anywhere (inside the prose, between calls) is dropped in both paths and the
    calls are unchanged."""
    call = SYNTAX[cls.name][0].normal
    tok = cls.end_tokens[0]
    text = f"a{tok}b {call}{tok}\n"
    got, clean = cls().parse(text), cls().parse(f"ab {call}\n")
    assert (got.content, got.calls) == (clean.content, clean.calls)
    assert_property(cls, text)


@pytest.mark.parametrize("cls", WITH_END_TOKENS, ids=[c.name for c in WITH_END_TOKENS])
@QUICK
@given(data=st.data())
def test_end_tokens_streamed_equals_whole(cls, data):
    """Streamed == whole for text made of the family's markers, end tokens, pieces of both, a
    normal call and free text, under every chunking."""
    pieces = [*cls.markers, *cls.end_tokens, *(t[: len(t) // 2] for t in cls.end_tokens), SYNTAX[cls.name][0].normal]
    text = data.draw(text_with(pieces))
    assert_property(cls, text)


@given(st.lists(st.sampled_from(["<|im_end|>", "<|im_", "end|>", "<|endoftext|>", "<", "|", "a", "\n"]), max_size=8), st.data())
def test_token_stripper_equals_strip_tokens(parts, data):
    """:class:`TokenStripper` over any chunking gives :func:`strip_tokens` of the joined text."""
    tokens = ("<|im_end|>", "<|endoftext|>")
    text = "".join(parts)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=4)))
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    f = TokenStripper(tokens)
    assert "".join(f.feed(d) for d in deltas) + f.finish() == strip_tokens(text, tokens)


def test_prefix_tokens_are_refused():
    with pytest.raises(ValueError, match="prefix"):
        TokenStripper(("<|eot|>", "<|eot|>x"))


class _Leaky(TokenStripper):
    """Planted bug: the stripper removes only tokens whole inside one delta (no hold-back)."""

    def feed(self, delta):
        return strip_tokens(delta, self.tokens)


def test_planted_leaky_stripper_is_caught(monkeypatch):
    """With a stripper that does not hold back a split token, the streamed == whole check fails
    for a token cut in two (the property above would catch it)."""
    import replay.parsers._family as fam

    monkeypatch.setattr(fam, "TokenStripper", _Leaky)
    text = "The answer is 42.<|im_end|>"
    failures = check_stream_equals_whole(HermesParser, text, all_chunkings(HermesParser, text))
    assert failures and any("<|im" in f.describe() for f in failures)


# ----------------------------------------------------------------------------- typing
INT_TYPES = ["integer", "int", "int64", "uint32", "long", "short", "unsigned"]
NUM_TYPES = ["number", "float", "num", "numeric", "float64"]
BOOL_TYPES = ["boolean", "bool", "binary"]


@given(st.integers(-(10**12), 10**12), st.sampled_from(INT_TYPES + NUM_TYPES), st.sampled_from(["", " ", "\n"]))
def test_integer_text_is_an_int_for_integer_and_number_type_names(n, t, pad):
    assert convert_value(f"{pad}{n}{pad}", t) == n and type(convert_value(str(n), t)) is int


@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer()), st.sampled_from(NUM_TYPES))
def test_float_text_is_a_float_for_number_type_names(x, t):
    assert convert_value(repr(x), t) == x


@given(st.booleans(), st.sampled_from(BOOL_TYPES), st.sampled_from([str.lower, str.upper, str.title]))
def test_boolean_text_for_bool_type_names(b, t, case):
    assert convert_value(case(json.dumps(b)), t) is b


@given(st.sampled_from(INT_TYPES + NUM_TYPES + BOOL_TYPES + ["string", "object", "array", "null", "anything"]), st.sampled_from(["null", "NULL", " Null\n"]))
def test_null_is_none_whatever_the_type(t, text):
    assert convert_value(text, t) is None


@pytest.mark.parametrize(
    "text, declared, want",
    [
        ("3.14", "float", 3.14),
        ("42", "int64", 42),
        ("05", "int64", 5),
        ("7", "uint", 7),
        ("TRUE", "binary", True),
        ("x7", "long", "x7"),
        ("hello", "string", "hello"),
        ("1", "string", "1"),
        ("1", "enum", "1"),
        ('{"a": 1}', "object", {"a": 1}),
        ("{'a': (1, 2)}", "object", {"a": [1, 2]}),
        ("[1, 'x', None, True]", "array", [1, "x", None, True]),
        ("{1, 2}", "array", "{1, 2}"),
        ("yes", "boolean", "yes"),
        ("not json", "object", "not json"),
        ('"quoted"', "dict", "quoted"),
    ],
)
def test_typing_table(text, declared, want):
    got = convert_value(text, declared)
    assert got == want and type(got) is type(want)


def _xml(param):
    return f"<tool_call>\n<function=f>\n<parameter=a>\n{param}\n</parameter>\n</function>\n</tool_call>"


TYPED = {
    Qwen3CoderParser: _xml,
    SeedOssParser: lambda v: f"<seed:tool_call>\n<function=f>\n<parameter=a>\n{v}\n</parameter>\n</function>\n</seed:tool_call>",
    Glm45Parser: lambda v: f"<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>{v}</arg_value>\n</tool_call>",
    MiniMaxM2Parser: lambda v: f'<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">{v}</parameter>\n</invoke>\n</minimax:tool_call>',
    DeepSeekV32Parser: lambda v: SYNTAX["deepseek_v32"][0].head + v + SYNTAX["deepseek_v32"][0].tail,
}
VALUES = [("42", "int64", 42), ("3.5", "float", 3.5), ("True", "bool", True), ("null", "integer", None), ("null", "string", None), ("(1, 'a')", "array", [1, "a"]), ("{'k': None}", "object", {"k": None}), ("12", "string", "12")]


@pytest.mark.parametrize("cls", list(TYPED), ids=[c.name for c in TYPED])
@pytest.mark.parametrize("text, declared, want", VALUES)
def test_schema_typing_whole_and_streamed(cls, text, declared, want):
    """Every family that types by schema gives the declared type's value, whole-text and under
    every chunking (streamed == whole)."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": declared}}}}}]
    out = TYPED[cls](text)
    calls = cls(tools).parse(out).calls
    assert [c.name for c in calls] == ["f"] and json.loads(calls[0].arguments) == {"a": want}, calls
    assert_property(cls, out, tools=tools)


@pytest.mark.parametrize("attr, value, text, declared, want", [
    ("_INT_PREFIXES", ("integer",), "05", "int64", 5),
    ("_NUM_PREFIXES", ("number",), "true", "float", "true"),
    ("_STRING_TYPES", frozenset(("string",)), "1", "enum", "1"),
])
def test_planted_typing_bug_is_caught(monkeypatch, attr, value, text, declared, want):
    """With the old exact-name rules (``int64`` / ``float`` / ``enum`` not recognised), a row of
    the typing table fails."""
    import replay.parsers._schema as schema

    assert convert_value(text, declared) == want
    monkeypatch.setattr(schema, attr, value)
    assert convert_value(text, declared) != want or type(convert_value(text, declared)) is not type(want)


# ----------------------------------------------------------------------------- string arguments
JSON_CALLS = {
    HermesParser: lambda name, args: "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>",
    Granite4Parser: lambda name, args: "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>",
    GraniteParser: lambda name, args: "<|tool_call|>" + json.dumps([{"name": name, "arguments": args}]),
    Llama3JsonParser: lambda name, args: json.dumps({"name": name, "parameters": args}),
    MistralParser: lambda name, args: "[TOOL_CALLS] " + json.dumps([{"name": name, "arguments": args}]),
}
objects = st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none()), max_size=3)


@pytest.mark.parametrize("cls", list(JSON_CALLS), ids=[c.name for c in JSON_CALLS])
@QUICK
@given(obj=objects, s=st.text(max_size=12))
@example(obj={}, s="<|eot|>")  # Llama 4's end token inside the string (found by Hypothesis)
@example(obj={"a": 1}, s='{"b": 2}<|im_end|>')
def test_string_arguments_are_a_call(cls, obj, s):
    """``"arguments"`` as a JSON string: a string holding an object is that object; any other
    string is the call's arguments as the string's JSON text; a call either way, whole-text and
    streamed (streamed == whole under every chunking). The family's end tokens are removed from
    the raw text first (``end_tokens``, a documented rule of every family), inside a string too:
    ``"<|eot|>"`` reaches Llama 3 JSON's arguments as ``""``."""
    kept = cls().strip_end_tokens(s)
    for args, want in ((json.dumps(obj), obj), (s, json.loads(kept) if _is_object_text(kept) else kept)):
        text = JSON_CALLS[cls]("f", args)
        calls = cls().parse(text).calls
        assert [c.name for c in calls] == ["f"], text
        assert json.loads(calls[0].arguments) == want
        assert_property(cls, text)


def _is_object_text(s):
    try:
        return isinstance(json.loads(s), dict)
    except ValueError:
        return False


def test_planted_string_arguments_bug_is_caught(monkeypatch):
    """With a string ``arguments`` rejected again (the old rule), a Hermes call is lost."""
    import replay.parsers.hermes as hermes

    monkeypatch.setattr(hermes, "arguments_text", lambda a: json.dumps(a) if isinstance(a, dict) else None)
    assert HermesParser().parse(JSON_CALLS[HermesParser]("f", '{"a": 1}')).calls == ()


# ----------------------------------------------------------------------------- Mistral list + text
@QUICK
@given(obj=objects, tail=st.text(max_size=10).filter(lambda t: t.strip() and "[TOOL_CALLS]" not in t), sep=st.sampled_from(["", "\n", " "]))
def test_mistral_call_list_then_text(obj, tail, sep):
    """``[TOOL_CALLS] [calls]`` then text: the calls, then the text from just after ``]`` as content;
    streamed == whole under every chunking."""
    text = "[TOOL_CALLS] " + json.dumps([{"name": "f", "arguments": obj}]) + sep + tail
    got = MistralParser().parse(text)
    assert [c.name for c in got.calls] == ["f"] and json.loads(got.calls[0].arguments) == obj
    assert got.content == sep + MistralParser().parse(tail).content or tail.lstrip().startswith("[")
    assert_property(MistralParser, text)
