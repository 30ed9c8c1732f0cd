"""Exemplar masking (replay/mask.py redact_text, redact_tool): no user word survives, not even
`null`, `true` or `arguments`; only the family's markers, tool and parameter names and the call
syntax / JSON structure stay."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from hypo import examples

from replay.mask import STRUCTURAL_WORDS, redact_text, redact_tool

HERMES = ("<tool_call>", "</tool_call>")


def test_prose_structural_words_are_masked_json_literals_and_keys_kept():
    text = (
        "The arguments are null and true. Set it to null.\n<tool_call>\n"
        '{"name": "read", "arguments": {"path": "null", "n": null, "b": [true, false]}}\n</tool_call>'
    )
    red = redact_text(text, keep={"read", "path"}, markers=HERMES)
    assert len(red) == len(text)
    assert red == (
        "xxx xxxxxxxxx xxx xxxx xxx xxxx. xxx xx xx xxxx.\n<tool_call>\n"
        '{"name": "read", "arguments": {"path": "xxxx", "x": null, "x": [true, false]}}\n</tool_call>'
    )
    body = red.split("<tool_call>\n")[1].split("\n</tool_call>")[0]
    assert json.loads(body) == {"name": "read", "arguments": {"path": "xxxx", "x": [True, False]}}  # duplicate key: the last wins


def test_each_family_syntax_keeps_its_words_and_masks_the_values():
    cases = [
        # Harmony: channel, recipient and constraint are syntax; the argument string is user text
        (
            '<|start|>assistant<|channel|>commentary to=functions.read <|constrain|>json<|message|>{"path": "function call"}<|call|>',
            ("<|start|>", "<|channel|>", "<|constrain|>", "<|message|>", "<|call|>"),
            '<|start|>assistant<|channel|>commentary to=functions.read <|constrain|>json<|message|>{"path": "xxxxxxxx xxxx"}<|call|>',
        ),
        # Qwen3-Coder XML
        (
            "<tool_call>\n<function=read>\n<parameter=path>\nnull arguments\n</parameter>\n</function>\n</tool_call>",
            HERMES,
            "<tool_call>\n<function=read>\n<parameter=path>\nxxxx xxxxxxxxx\n</parameter>\n</function>\n</tool_call>",
        ),
        # MiniMax-M2 / DSML attributes
        (
            '<minimax:tool_call><invoke name="read"><parameter name="path" string="true">true name</parameter></invoke>',
            ("<minimax:tool_call>",),
            '<minimax:tool_call><invoke name="read"><parameter name="path" string="true">xxxx xxxx</parameter></invoke>',
        ),
        # Gemma 4
        (
            '<|tool_call>call:read{path:<|"|>x is null<|"|>}<tool_call|>',
            ("<|tool_call>", "<tool_call|>", '<|"|>'),
            '<|tool_call>call:read{path:<|"|>x xx xxxx<|"|>}<tool_call|>',
        ),
    ]
    for text, markers, want in cases:
        assert redact_text(text, keep={"read", "path"}, markers=markers) == want


def test_tool_descriptions_lose_every_word():
    tool = {"type": "function", "function": {"name": "read", "description": "Returns null; the arguments are true",
                                             "parameters": {"type": "object", "properties": {"path": {"type": "string", "default": None,
                                                                                                      "enum": ["null", "true"]}}}}}
    red = redact_tool(tool, {"read", "path"})
    assert red["function"]["description"] == "xxxxxxx xxxx; xxx xxxxxxxxx xxx xxxx"
    assert red["function"]["parameters"]["properties"]["path"] == {"type": "string", "default": None, "enum": ["xxxx", "xxxx"]}


PROSE_WORDS = st.sampled_from(sorted(STRUCTURAL_WORDS) + ["Hello", "Zoë", "data", "42"])
SEPARATORS = st.sampled_from([" ", ", ", ". ", "! ", "? ", "\n", " (", ") ", "; ", ": "])


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(PROSE_WORDS, SEPARATORS), min_size=1, max_size=30))
def test_no_letter_of_prose_survives(parts):
    """Sentences built of the structural words themselves: masked to x's, whatever the order."""
    text = "".join(w + s for w, s in parts)
    red = redact_text(text, keep=(), markers=HERMES)
    assert len(red) == len(text)
    assert re.sub(r"[x0-9\W]", "", red) == "", red


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(PROSE_WORDS, SEPARATORS), min_size=1, max_size=12))
def test_no_letter_of_a_string_argument_survives(parts):
    """The same words as a JSON string value of a call's arguments: masked; the JSON still parses."""
    value = "".join(w + s for w, s in parts)
    text = "<tool_call>\n" + json.dumps({"name": "read", "arguments": {"path": value}}) + "\n</tool_call>"
    red = redact_text(text, keep={"read", "path"}, markers=HERMES)
    args = json.loads(red.split("\n")[1])["arguments"]
    assert re.sub(r"[x0-9\W]", "", args["path"]) == "", args
