"""Shared pieces of the parser tests: hypothesis strategies, the property assertion, planted bugs,
and the checkers of the shared corpus and public-bug cases.

The family suite (``tests/families``) and the other parser tests import from here, so that each
family is held to one property:
for every chunking (default ones, ``char-raw``, seeded random splits, every two-way split) the
streamed calls joined by index equal the whole-text parse (see
:func:`replay.stream.check_stream_equals_whole`), and to one reading of the shared data:
:func:`check_corpus_records` (``../shared/corpus/outputs``) and :func:`check_public_bug_cases`
(``../shared/cases/public-bugs.jsonl``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
import os
from pathlib import Path

import pytest
from hypothesis import strategies as st

from replay.parsers._reasoning import THINK
from replay.parsers.base import CallDelta, StreamDelta
from replay.stream import (
    CHUNKINGS_DEFAULT,
    SYNTHETIC_DEFAULT,
    check_stream_equals_whole,
    replay_stream,
    same_call,
    split,
    two_way_splits,
)

#: The steering repo's shared/ beside this checkout (a worktree elsewhere: set REPLAY_SHARED).
SHARED = Path(os.environ.get("REPLAY_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
OUTPUTS = SHARED / "corpus" / "outputs"
PUBLIC_BUGS = SHARED / "cases" / "public-bugs.jsonl"



def all_chunkings(parser_cls, text):
    """Every default chunking, char-raw, three seeded random splits and every two-way split."""
    named = [*CHUNKINGS_DEFAULT, "char-raw", "random-0", "random-1", "random-2"]
    return named + [(f"split-{k}", d) for k, d in two_way_splits(text, parser_cls.markers)]


def assert_property(parser_cls, text, *, tools=None, reasoning_open=False):
    """Streamed == whole for ``text`` under every chunking of :func:`all_chunkings`; the failure
    message names the smallest failing chunking and its deltas."""
    failures = check_stream_equals_whole(
        parser_cls, text, all_chunkings(parser_cls, text), tools=tools, reasoning_open=reasoning_open
    )
    assert not failures, f"{len(failures)} failing chunkings; smallest: {failures[0].describe()}\n text={text!r}"


THINK_PIECES = ["<think>", "</think>", "<thi", "</th", "\n", " "]


def with_reasoning(body_strategy, markers=()):
    """``(text, reasoning_open)``: a body, sometimes behind a ``<think>...</think>`` section
    (opened in the output, or by the prompt), whose text may mention the family's markers."""
    inner = text_with(list(markers) + THINK_PIECES[2:])
    head = st.one_of(
        st.just(("", False)),
        st.builds(lambda r, w: (f"<think>{r}</think>{w}", False), inner, st.sampled_from(["", "\n\n", " "])),
        st.builds(lambda r, w: (f"{r}</think>{w}", True), inner, st.sampled_from(["", "\n"])),
        st.builds(lambda r: (f"<think>{r}", False), inner),  # never closed
    )
    return st.tuples(head, body_strategy).map(lambda hb: (hb[0][0] + hb[1], hb[0][1]))


def stream(parser_cls, deltas):
    return replay_stream(parser_cls, None, deltas)


plain_chars = st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs", "Cc"))


def text_with(markers):
    """Free text that often contains the family's markers or pieces of them."""
    piece = st.one_of(
        st.text(plain_chars, max_size=6),
        st.sampled_from(["\n", " ", "<", ">", "{", "}", '"', "\\", "é", "中文", "😀"]),
        st.sampled_from(markers),
    )
    return st.lists(piece, max_size=4).map("".join)


def json_values(markers):
    strings = st.one_of(
        st.text(max_size=8),
        st.sampled_from(['"', "\\", "\n", "\\n", "\u2028", "é", "\U0001f600", "</", "{", "}"]),
        st.builds(lambda a, m, b: a + m + b, st.text(max_size=3), st.sampled_from(markers), st.text(max_size=3)),
    )
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**15), 10**15),
        st.floats(allow_nan=False, allow_infinity=False),
        strings,
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=8,
    )


def json_objects(markers):
    return st.dictionaries(st.text(max_size=6) | st.sampled_from(["a", "city", "path"]), json_values(markers), max_size=4)


DUMP_STYLES = [{}, {"ensure_ascii": False}, {"separators": (",", ":")}, {"indent": 1}, {"indent": 2, "ensure_ascii": False}]
ws = st.sampled_from(["", "\n", " ", "\n\n", " \t\r\n"])
names = st.one_of(st.sampled_from(["get_weather", "f", "search_web", "a.b-c"]), st.text(max_size=6))


class RawArgsFirst:
    """Planted bug (a): the model's raw argument text is sent before the parsed JSON."""

    def _emit_call(self, index, name, arguments, raw):
        return [CallDelta(index, name, raw), CallDelta(index, None, arguments)]


class SilentFinish:
    """Planted bug (b): finish() reports nothing."""

    def finish(self):
        return StreamDelta()


class DropFinishCalls:
    """Planted bug (b'), for parsers that emit calls from finish(): its calls are dropped, its
    content kept."""

    def finish(self):
        out = super().finish()
        return StreamDelta(content=out.content, reasoning=getattr(out, "reasoning", ""))


def opened(cls):
    """``cls`` constructed with ``reasoning_open=True`` (the prompt opened the reasoning)."""
    return type(cls.__name__ + "Open", (cls,), {"__init__": lambda self, tools=None: cls.__init__(self, tools, reasoning_open=True)})


VERBATIM = "verbatim"


def long_unterminated_guard(cls, text, content: str | None = VERBATIM):
    """``parse`` and a fixed-4096 stream of ``text`` (a long call cut off by the end of the
    stream) finish within 60 s (no catastrophic backtracking), find no call and give the same
    content; that content is ``content``: the text verbatim by default, or the given text, or
    not compared when None (the family drops framing from it)."""
    result = {}

    def run():
        result["whole"] = cls().parse(text)
        result["stream"] = replay_stream(cls, None, split(text, "fixed-4096", markers=cls.markers))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "parse/stream did not finish within 60 s"
    assert result["whole"].calls == () and result["stream"].calls == []
    assert result["stream"].content == result["whole"].content
    if content is not None:
        assert result["whole"].content == (text if content is VERBATIM else content)


# ----------------------------------------------------------------------------- the shared corpus
def prompt_opened(tags: tuple[str, str] | None = THINK, *, flag: bool = True) -> Callable[[dict], bool]:
    """A rule for "the prompt opened the reasoning section" of a corpus record: its test context
    says thinking is on (``flag``), or its text closes a section with ``tags`` it never opened."""

    def rule(rec: dict) -> bool:
        if flag and (rec.get("test_context") or {}).get("enable_thinking") == "true":
            return True
        return tags is not None and tags[1] in rec["text"] and tags[0] not in rec["text"]

    return rule


def corpus_records(fname: str) -> list[dict]:
    """The records of ``OUTPUTS / fname``; the calling test is skipped when the file is absent."""
    path = OUTPUTS / fname
    if not path.exists():
        pytest.skip(f"no {path}")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass
class CorpusTally:
    """What :func:`check_corpus_records` did: ``checked`` records asserted, ``with_calls`` of
    them with expected calls, ``skipped`` the skip reasons met (in record order)."""

    checked: int = 0
    with_calls: int = 0
    skipped: list[str] = field(default_factory=list)


def _assert_runs(cls, rec, tools, ro, check_reasoning, where):
    """A record's expectations under the whole-text parse, ``whole``, ``char`` and every two-way
    split: calls (names, same JSON arguments), content and reasoning when given (stripped)."""
    text = rec["text"]
    expected = rec.get("expected_calls") or []
    runs = [("parse", cls(tools, reasoning_open=ro).parse(text))]
    runs += [(ch, replay_stream(cls, tools, split(text, ch, markers=cls.markers), reasoning_open=ro)) for ch in ("whole", "char")]
    runs += [(f"split-{k}", replay_stream(cls, tools, d, reasoning_open=ro)) for k, d in two_way_splits(text, cls.markers)]
    for label, got in runs:
        at = f"{where} under {label}"
        assert [c.name for c in got.calls] == [c["name"] for c in expected], at
        for g, w in zip(got.calls, expected):
            assert same_call(g.arguments, json.dumps(w["arguments"])), (at, g.arguments, w["arguments"])
        if rec.get("expected_content") is not None:
            assert got.content.strip() == rec["expected_content"].strip(), at
        if check_reasoning and rec.get("expected_reasoning") is not None:
            assert got.reasoning.strip() == rec["expected_reasoning"].strip(), at


def check_corpus_records(
    cls,
    fname: str,
    expected_checked: int,
    *,
    skip: dict[int, str] | Callable[[dict], str | None] = {},  # noqa: B006 - read only
    reasoning_open_rule: Callable[[dict], bool] = prompt_opened(),
    calls_only: bool = False,
    tools_for: Callable[[dict], list[dict] | None] = lambda rec: None,
    no_reasoning: dict[int, str] = {},  # noqa: B006 - read only
    property_on_all: bool = False,
) -> CorpusTally:
    """Check ``cls`` against the corpus file ``fname``; assert that ``expected_checked`` records
    were checked and return the :class:`CorpusTally`.

    Every record parses and streams (``char``) without an exception; with ``property_on_all``,
    stream == whole holds for it under every chunking of :func:`all_chunkings`. A record is then
    skipped when ``skip`` names it (a ``{line index: reason}`` dict, 0-based, or a function of
    the record giving a reason or None). It is checked when it is complete (not ``partial``),
    its expected calls all have ``arguments``, and it expects something: calls (with
    ``calls_only``: at least one call), content or reasoning. A checked record gives its calls
    (none when it expects none), its content and, unless ``no_reasoning`` names it, its reasoning
    under the whole-text parse, ``whole``, ``char`` and every two-way split.

    ``reasoning_open_rule(record)``: the prompt opened the reasoning (:func:`prompt_opened`);
    ``tools_for(record)``: the request's tools for the record.
    """
    tally = CorpusTally()
    for i, rec in enumerate(corpus_records(fname)):
        text, tools, ro = rec["text"], tools_for(rec), reasoning_open_rule(rec)
        cls(tools, reasoning_open=ro).parse(text)
        replay_stream(cls, tools, split(text, "char", markers=cls.markers), reasoning_open=ro)
        if property_on_all:
            assert_property(cls, text, tools=tools, reasoning_open=ro)
        reason = skip(rec) if callable(skip) else skip.get(i)
        if reason:
            tally.skipped.append(reason)
            continue
        calls = rec.get("expected_calls")
        if rec.get("partial") or any("arguments" not in c for c in calls or []):
            continue
        if calls_only and not calls:
            continue
        if calls is None and rec.get("expected_content") is None and rec.get("expected_reasoning") is None:
            continue
        _assert_runs(cls, rec, tools, ro, i not in no_reasoning, f"{fname} record {i} ({rec.get('source')})")
        tally.checked += 1
        tally.with_calls += bool(calls)
    assert tally.checked == expected_checked, (fname, tally)
    return tally


# ----------------------------------------------------------------------------- public bug cases
def public_bug_cases(parser_names: tuple[str, ...]) -> list[dict]:
    """The public-bug cases (with a raw output) whose parser is one of ``parser_names``."""
    if not PUBLIC_BUGS.exists():
        return []
    rows = [json.loads(line) for line in PUBLIC_BUGS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [c for c in rows if (c.get("input") or {}).get("parser") in parser_names and "raw_output" in c["input"]]


def _opened_by_prompt(inp: dict) -> bool:
    """The case's prompt ends inside an opened reasoning section (``prompt_ends_with`` ``<think>``)."""
    return str(inp.get("prompt_ends_with") or "").rstrip().endswith(THINK[0])


def check_public_bug_case(cls, case: dict) -> None:
    """The case's expected calls (names, same JSON arguments, and the exact joined argument
    strings when given), content and reasoning when given, and finish reason, under the
    whole-text parse, every synthetic default chunking and the recorded chunks when the case has
    them; the same for its variant output (``variant_raw_output``, expected ``variant_tool_calls``
    or, when the case states none, the variant's own whole-text parse). A prompt that opened the
    reasoning (``prompt_ends_with`` ``<think>``) is honoured."""
    inp, expected = case["input"], case["expected"]
    ro = _opened_by_prompt(inp)
    _check_bug_text(cls, case["id"], inp["raw_output"], inp.get("tools"), inp.get("chunks"), expected, ro)
    if "variant_raw_output" in inp:
        variant = {"tool_calls": expected["variant_tool_calls"]} if "variant_tool_calls" in expected else {}
        _check_bug_text(cls, case["id"] + "/variant", inp["variant_raw_output"], inp.get("tools"), inp.get("variant_chunks"), variant, ro)


def _check_bug_text(cls, cid, text, tools, steps, expected, ro) -> None:
    chunkings = {name: split(text, name, markers=cls.markers) for name in SYNTHETIC_DEFAULT}
    if steps is not None:
        chunkings["recorded"] = split(text, "recorded", steps=steps)
    whole = (cls(tools, reasoning_open=True) if ro else cls(tools)).parse(text)
    runs = {"parse": whole}
    want_calls, want_content = expected_outcome(expected)
    if want_calls is None:  # an invariant-only case: every chunking gives the whole-text parse
        want_calls = [{"name": c.name, "arguments": json.loads(c.arguments)} for c in whole.calls]
        want_content = whole.content
    finish = expected.get("finish_reason", "tool_calls" if want_calls else "stop")
    for name, deltas in chunkings.items():
        runs[name] = got = replay_stream(cls, tools, deltas, reasoning_open=ro)
        assert got.finish_reason == finish, (cid, name)
    for name, got in runs.items():
        at = (cid, name)
        assert [c.name for c in got.calls] == [c["name"] for c in want_calls], at
        for g, w in zip(got.calls, want_calls):
            assert same_call(g.arguments, json.dumps(w["arguments"])), at
        if "joined_stream_arguments" in expected:
            assert [c.arguments for c in got.calls] == expected["joined_stream_arguments"], at
        if want_content is not None and "responses_items" in expected:
            # A Responses message item is its own output item: the whitespace that separated it
            # from a function_call item in the completion text has no place in that form.
            assert got.content.strip() == want_content.strip(), at
        elif want_content is not None:
            assert got.content == want_content, at
        if "reasoning" in expected:
            assert got.reasoning.strip() == expected["reasoning"].strip(), at
        for bad in expected.get("reasoning_not_contains", ()):
            assert bad not in got.reasoning, at


def expected_outcome(expected: dict) -> tuple[list[dict] | None, str | None]:
    """The calls (``[{"name", "arguments": object}]``) and content a case expects, read from
    ``expected.tool_calls`` / ``expected.content`` (Chat Completions form) or from
    ``expected.responses_items`` (Responses API form: ``function_call`` items with JSON-text
    arguments, ``message`` items whose texts join to the content). ``(None, None)`` for a case
    that states only invariants."""
    if "tool_calls" in expected:
        return expected["tool_calls"], expected.get("content")
    if "responses_items" in expected:
        items = expected["responses_items"]
        calls = [
            {"name": i["name"], "arguments": json.loads(i["arguments"])} for i in items if i.get("type") == "function_call"
        ]
        texts = [i.get("text", "") for i in items if i.get("type") == "message"]
        return calls, ("".join(texts) if texts else expected.get("content"))
    return None, expected.get("content")


def check_public_bug_cases(cls, parser_names: tuple[str, ...]) -> list[str]:
    """Check every public-bug case of ``parser_names`` with :func:`check_public_bug_case`; the
    calling test is skipped when there is none. Returns the case ids."""
    cases = public_bug_cases(parser_names)
    if not cases:
        pytest.skip(f"no {' / '.join(parser_names)} case in {PUBLIC_BUGS}")
    for case in cases:
        check_public_bug_case(cls, case)
    return [c["id"] for c in cases]


# ----------------------------------------------------------------------------- <function=> XML families
# Qwen3-Coder and Seed-OSS write the same <function=NAME><parameter=KEY> grammar with their own
# block and reasoning tags (the parser class's START, END and THINK).

#: Tools with declared types, used by part of the generated examples (typing in both paths).
TYPED_TOOLS = [
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer"}, "s": {"type": "string"}, "n": {"type": "number"}, "b": {"type": "boolean"},
        "o": {"type": "object"}, "l": {"type": "array"}, "z": {"type": ["null", "string"]}}}}},
]


def _tool(tool_name, **props):
    return {"type": "function", "function": {"name": tool_name, "parameters": {"type": "object", "properties": {k: {"type": t} for k, t in props.items()}}}}


#: llama.cpp test tools (tests/test-chat.cpp) whose declared types decide the expected values;
#: the other tools of the corpus are read with the undeclared-JSON fallback, which gives the same.
LLAMA_TOOLS = {
    "special_function_tool": _tool("special_function", arg1="integer"),
    "special_function_tool_with_optional_param": _tool("special_function_with_opt", arg1="integer", arg2="integer"),
    "python_tool": _tool("python", code="string"),
    "html_tool": _tool("html", markup="string"),
    "todo_list": _tool("todo_list", todos="array"),
    "edit_tool": _tool("edit", filename="string", oldString="string", newString="string"),
    "magic_tool": _tool("magic", name="string", ref="string"),
    "magic_int_tool": _tool("magic_int", ref="integer", name="string"),
    "amount_tool": _tool("amount", orig="number"),
    "imaginary_number_tool": _tool("imaginary_number", number="object"),
    "string_param_tool": _tool("string_param", text="string"),
    "quoted_unquoted_tool": _tool("quoted_unquoted", quoted="string", unquoted="string"),
    "empty_args_tool": _tool("empty_args"),
}


def llama_tools(rec: dict) -> list[dict] | None:
    """The declared tools of a llama.cpp corpus record (``tools_for`` of :func:`check_corpus_records`)."""
    return [LLAMA_TOOLS[t] for t in (rec.get("test_context") or {}).get("tools", []) if t in LLAMA_TOOLS] or None


#: corpus skip reason of the llama.cpp continue_final_message tests
CONTINUE = "llama.cpp continue_final_message test: text is the continuation of a prefilled message, expected values include the prefill"


def family_markers(cls):
    start, end = cls.START, cls.END
    t0, t1 = cls.THINK
    return [start, end, t0, t1, "<function=", "</function>", "<parameter=", "</parameter>",
            start[:-3], end[:5], "</param", "<func", ">"]


def xml_values(markers):
    """Raw parameter text: JSON of every value type (escaped, non-ASCII), or free text with markers."""
    dumped = st.builds(lambda v, a: json.dumps(v, ensure_ascii=a), json_values(markers), st.booleans())
    return st.one_of(dumped, text_with(markers), st.sampled_from(["1", "-14", "3.14", "true", "null", "", "\n", "x\n\n", "格"]))


@st.composite
def xml_call(draw, cls, markers):
    name = draw(st.one_of(st.sampled_from(["f", "get_weather", "a.b-c", "名前"]), st.text(st.characters(exclude_characters="<>"), min_size=1, max_size=5)))
    parts = [cls.START, draw(ws), f"<function={name}>", draw(ws)]
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        key = draw(st.one_of(st.sampled_from(["a", "s", "n", "b", "o", "l", "z", "city", ""]), st.text(st.characters(exclude_characters="<>"), max_size=4)))
        nl = draw(st.sampled_from(["\n", "\n", ""]))
        close = draw(st.sampled_from(["</parameter>"] * 6 + [""]))
        parts += [f"<parameter={key}>", nl, draw(xml_values(markers)), nl, close, draw(ws)]
    parts += ["</function>", draw(ws), cls.END]
    return "".join(parts)


def xml_malformed(cls, markers):
    s, e = cls.START, cls.END
    return st.one_of(
        st.builds(lambda t: f"{s}{t}{e}", text_with(markers)),
        st.builds(lambda t: f"{s}\n<function=f>\n{t}\n</function>\n{e}", text_with(markers)),
        st.sampled_from([
            f"{s}\n<function=>\n</function>\n{e}",
            f"{s}\n<function=a<b>\n</function>\n{e}",
            f"{s}<function=f></function><function=g></function>{e}",
            f"{s}<function=f></function> junk{e}",
            f"{s}junk<function=f></function>{e}",
            f"{s}<function=f><parameter=a>1</parameter>x<parameter=b>2</parameter></function>{e}",
            f"{s}<function=f><parameter=a<b>1</parameter></function>{e}",
            f"{s}\n<function=f>\n<parameter=a>\n1\n</parameter>\n{e}",
            f"{s}{s}<function=f></function>{e}",
            f"{s}\n<function=f",
        ]),
    )


@st.composite
def xml_outputs(draw, cls):
    markers = family_markers(cls)
    t0, t1 = cls.THINK
    parts = []
    lead = draw(st.sampled_from(["none", "none", "think", "open"]))
    if lead == "think":
        parts.append(draw(st.sampled_from(["", "\n"])) + t0 + draw(text_with(markers)) + t1 + draw(ws))
    elif lead == "open":
        parts.append(draw(text_with(markers)) + t1 + draw(ws))
    parts.append(draw(text_with(markers)))
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        parts.append(draw(st.one_of(xml_call(cls, markers), xml_call(cls, markers), xml_malformed(cls, markers))))
        parts.append(draw(st.one_of(st.just(""), st.just("\n"), text_with(markers))))
    text = "".join(parts)
    ending = draw(st.sampled_from(["keep", "keep", "unterminated", "cut"]))
    if ending == "unterminated" and text.rstrip().endswith(cls.END):
        text = text.rstrip()[: -len(cls.END)] + draw(ws)
    elif ending == "cut" and text:
        text = text[: draw(st.integers(0, len(text)))]
    return text
