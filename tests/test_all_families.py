"""Properties every family must have, checked over :func:`replay.parsers.families`.

* A call whose argument value is nested 100,000 deep (arrays; arrays and objects alternating)
  never crashes a parse,
  is never a call (the rule of :mod:`replay.parsers._jsonscan`: a value nested deeper than
  ``MAX_DEPTH`` is not decoded), streams exactly as the whole-text parse gives it, and does not
  stop a normal call after it from being found.
* A call cut off after its opening marker and 1 MB of argument text is parsed in bounded time,
  is no call, and its text is kept as content (streamed == whole).

Each family is described once, in :data:`SYNTAX`: how to write a call to ``f`` whose argument
``a`` has a given value text, a complete call to ``g`` with no arguments, and how a string value
opens in that syntax.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from replay.parsers import families
from replay.parsers import deepseek_v31 as ds31
from replay.parsers import deepseek_v32 as ds32
from replay.parsers import gemma4, harmony, kimi_k2, pythonic, step3
from replay.parsers._jsonscan import MAX_DEPTH, TOO_DEEP, decode_at, loads_or_too_deep
from replay.parsers.granite import TOOL_CALL as GRANITE_CALL
from replay.parsers.llama3_json import PYTHON_TAG
from replay.parsers.mistral import ARGS, TOOL_CALLS
from replay.stream import compare_to_whole, replay_stream, split

DEPTH = 100_000
MEGABYTE = 1_000_000


@dataclass(frozen=True)
class Syntax:
    """How a family writes calls. ``head + VALUE + tail`` is a call to ``f`` whose argument ``a``
    has the value text VALUE (JSON text unless the family has its own value notation);
    ``normal`` a complete call to ``g`` with no arguments; ``string`` what opens a string value;
    :meth:`deep` the value text nested ``n`` deep."""

    head: str
    tail: str
    normal: str
    string: str = '"'
    notation: str = "json"  # json | gemma4

    def deep(self, shape: str, n: int) -> str:
        """``array``: ``[[[...]]]``; ``mixed``: arrays and objects alternating, ``[{"a": [{"a": ...``."""
        if shape == "array":
            return "[" * n + "]" * n
        key = "a:" if self.notation == "gemma4" else '"a":'
        return ("[{" + key) * (n // 2) + "1" + "}]" * (n // 2)


def _json_block(start: str, end: str, name_key: str = "arguments") -> Syntax:
    return Syntax(
        f'{start}{{"name": "f", "{name_key}": {{"a": ', f"}}}}{end}", f'{start}{{"name": "g", "{name_key}": {{}}}}{end}'
    )


def _xml_function(start: str, end: str) -> Syntax:
    return Syntax(
        f"{start}\n<function=f>\n<parameter=a>\n", f"\n</parameter>\n</function>\n{end}", f"{start}\n<function=g>\n</function>\n{end}", ""
    )


_DS_BEGIN = f"{ds31.CALL_BEGIN}function{ds31.SEP}"
_DSML_INVOKE = f'{ds32.FC_OPEN}\n{ds32.INVOKE} name="f">\n'
_HARMONY = f"<|start|>assistant<|channel|>commentary to=functions.{{}} {harmony.CONSTRAIN}json{harmony.MESSAGE}"

#: family name -> its syntax (one or more: DSML writes arguments as parameters or as a JSON body)
SYNTAX: dict[str, tuple[Syntax, ...]] = {
    "hermes": (_json_block("<tool_call>", "</tool_call>"),),
    "granite4": (_json_block("<tool_call>", "</tool_call>"),),
    "qwen3_coder": (_xml_function("<tool_call>", "</tool_call>"),),
    "seed_oss": (_xml_function("<seed:tool_call>", "</seed:tool_call>"),),
    "llama3_json": (_json_block(PYTHON_TAG, "", "parameters"),),
    "pythonic": (
        Syntax(
            f"{pythonic.TC_START}[f(a=", f")]{pythonic.TC_END}", f"{pythonic.TC_START}[g()]{pythonic.TC_END}"
        ),
    ),
    "mistral": (Syntax(f'{TOOL_CALLS}f{ARGS}{{"a": ', "}", f"{TOOL_CALLS}g{ARGS}{{}}"),),
    "deepseek_v3": (
        Syntax(
            f'{_DS_BEGIN}f\n```json\n{{"a": ', f"}}\n```{ds31.CALL_END}", f"{_DS_BEGIN}g\n```json\n{{}}\n```{ds31.CALL_END}"
        ),
    ),
    "deepseek_v31": (
        Syntax(
            f'{ds31.CALL_BEGIN}f{ds31.SEP}{{"a": ', f"}}{ds31.CALL_END}", f"{ds31.CALL_BEGIN}g{ds31.SEP}{{}}{ds31.CALL_END}"
        ),
    ),
    "deepseek_v32": (
        Syntax(
            f'{_DSML_INVOKE}{ds32.PARAM} name="a" string="false">',
            f"{ds32.PARAM_CLOSE}\n{ds32.INVOKE_CLOSE}\n{ds32.FC_CLOSE}",
            f'{ds32.FC_OPEN}{ds32.INVOKE} name="g">\n{ds32.INVOKE_CLOSE}{ds32.FC_CLOSE}',
            "",
        ),
        Syntax(
            f'{_DSML_INVOKE}{{"a": ',
            f"}}\n{ds32.INVOKE_CLOSE}\n{ds32.FC_CLOSE}",
            f'{ds32.FC_OPEN}{ds32.INVOKE} name="g">{{}}{ds32.INVOKE_CLOSE}{ds32.FC_CLOSE}',
        ),
    ),
    "kimi_k2": (
        Syntax(
            f'{kimi_k2.CALL_BEGIN}functions.f:0{kimi_k2.ARG_BEGIN}{{"a": ',
            f"}}{kimi_k2.CALL_END}",
            f"{kimi_k2.CALL_BEGIN}functions.g:1{kimi_k2.ARG_BEGIN}{{}}{kimi_k2.CALL_END}",
        ),
    ),
    "glm45": (
        Syntax("<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>", "</arg_value>\n</tool_call>", "<tool_call>g</tool_call>", ""),
    ),
    "harmony": (
        Syntax(_HARMONY.format("f") + '{"a": ', "}" + harmony.CALL, _HARMONY.format("g") + "{}" + harmony.CALL),
    ),
    "gemma4": (
        Syntax(
            f"{gemma4.START}call:f{{a:", f"}}{gemma4.END}", f"{gemma4.START}call:g{{}}{gemma4.END}", gemma4.STR, "gemma4"
        ),
    ),
    "minimax_m2": (
        Syntax(
            '<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">',
            "</parameter>\n</invoke>\n</minimax:tool_call>",
            '<minimax:tool_call>\n<invoke name="g">\n</invoke>\n</minimax:tool_call>',
            "",
        ),
    ),
    "step3": (
        Syntax(
            f'{step3.CALL_BEGIN}function{step3.SEP}<steptml:invoke name="f"><steptml:parameter name="a">',
            f"</steptml:parameter></steptml:invoke>{step3.CALL_END}",
            f'{step3.CALL_BEGIN}function{step3.SEP}<steptml:invoke name="g"></steptml:invoke>{step3.CALL_END}',
            "",
        ),
    ),
    "granite": (
        Syntax(
            f'{GRANITE_CALL}[{{"name": "f", "arguments": {{"a": ', "}}]", f'{GRANITE_CALL}[{{"name": "g", "arguments": {{}}}}]'
        ),
    ),
}

FAMILIES = families()


def test_every_family_has_a_syntax():
    assert sorted(SYNTAX) == sorted(cls.name for cls in FAMILIES)


@pytest.mark.parametrize("cls", FAMILIES, ids=[c.name for c in FAMILIES])
def test_normal_calls_of_the_syntax_table(cls):
    """The table itself: ``head + 1 + tail`` and ``normal`` are calls of the family."""
    for syn in SYNTAX[cls.name]:
        text = syn.head + "1" + syn.tail + syn.normal
        assert [(c.name, c.arguments) for c in cls().parse(text).calls] == [("f", '{"a": 1}'), ("g", "{}")]


def _at_stack_depth(frames, f):
    return f() if frames == 0 else _at_stack_depth(frames - 1, f)


def test_depth_rule_is_the_same_at_any_stack_depth():
    """``json`` gives up at a depth that depends on the caller's stack; the shared decoders do
    not: deeper than MAX_DEPTH is TOO_DEEP (with the value's extent), called from anywhere."""
    for depth, too_deep in ((MAX_DEPTH, False), (MAX_DEPTH + 1, True), (900, True)):
        nested = "[" * depth + "]" * depth
        for frames in (0, 600):
            value, end = _at_stack_depth(frames, lambda: decode_at(nested + " x", 0))
            assert ((value is TOO_DEEP), end) == (too_deep, 2 * depth), (depth, frames)
            assert (_at_stack_depth(frames, lambda: loads_or_too_deep(nested)) is TOO_DEEP) == too_deep


@pytest.mark.parametrize("shape", ["array", "mixed"])
@pytest.mark.parametrize("cls", FAMILIES, ids=[c.name for c in FAMILIES])
def test_value_nested_100000_deep_is_no_call(cls, shape):
    for syn in SYNTAX[cls.name]:
        text = syn.head + syn.deep(shape, DEPTH) + syn.tail + syn.normal
        whole = cls().parse(text)
        assert [(c.name, c.arguments) for c in whole.calls] == [("g", "{}")], syn
        assert syn.deep(shape, DEPTH) in whole.content
        for chunking in ("whole", "fixed-4096"):
            got = replay_stream(cls, None, split(text, chunking, markers=cls.markers))
            assert compare_to_whole(got, whole) == [], (chunking, syn)


@pytest.mark.parametrize("cls", FAMILIES, ids=[c.name for c in FAMILIES])
def test_one_megabyte_unterminated_call(cls):
    results = {}
    for syn in SYNTAX[cls.name]:
        argument = syn.string + "x" * MEGABYTE
        text = syn.head + argument

        def run(text=text):
            results["whole"] = cls().parse(text)
            results["stream"] = replay_stream(cls, None, split(text, "fixed-4096", markers=cls.markers))

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(timeout=60)
        assert not t.is_alive(), "parser did not finish on a 1 MB unterminated call"
        whole, got = results.pop("whole"), results.pop("stream")
        assert whole.calls == () and got.calls == []
        assert whole.content.endswith(argument) and got.content == whole.content
