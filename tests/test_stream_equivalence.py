"""Re-stream equivalence: the re-stream stage's fast paths checked against the plain way they
replace: the new side's rows copied in Arrow (:func:`replay.stages.rows.with_copies`) against the rows made as dicts
(:func:`replay.stages.stream.finish_stream` without ``copies``), the stage's tables against
:func:`replay.stages.stream.stream_exchange` on each exchange, the non-finite check of decoded JSON
(every value walked: its text prefilter cost more and missed a case), and the shared arguments encoder against
``json.dumps``."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from hypo import budget
from replay import tables
from replay.parsers._jsonscan import TOO_DEEP, _checked, _has_non_finite, dumps_arguments
from replay.parsers.hermes import HermesParser
from replay.stream import replay_stream
from replay.runspec import AuditConfig
from replay.stages.context import ParserResolver
from replay.stages.rows import rows_table, with_copies
from replay.stages.stream import stream_batch, stream_exchange

TOOL = {"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}


def _call(name: str, args: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


# ------------------------------------------------------------------ the new side's rows, copied
@budget(200)
@given(
    st.lists(st.tuples(st.sampled_from(["old", "reference", "new"]), st.integers(0, 9)), max_size=12),
    st.lists(st.tuples(st.sampled_from(["new", "x"]), st.integers(0, 12), st.integers(0, 12), st.integers(0, 12)), max_size=4),
)
def test_with_copies_is_the_rows_with_the_copies_as_dicts(rows, raw):
    schema = pa.schema([pa.field("side", pa.string(), nullable=False), pa.field("v", pa.int32())])
    dicts = [{"side": s, "v": v} for s, v in rows]
    n = len(dicts)
    copies, at = [], 0
    for side, a, r0, r1 in sorted(raw, key=lambda c: c[1]):
        at = max(at, min(a, n))
        r0, r1 = sorted((min(r0, n), min(r1, n)))
        copies.append((side, at, r0, r1))
    want, pos = [], 0
    for side, at, r0, r1 in copies:
        want.extend(dicts[pos:at])
        want.extend({**d, "side": side} for d in dicts[r0:r1])
        pos = at
    want.extend(dicts[pos:])
    got = with_copies(rows_table(dicts, schema), copies)
    assert got.schema == schema
    assert got.to_pylist() == want


def _exchanges(texts: list[tuple[str, list[str] | None]]) -> list[dict]:
    return [
        {
            "exchange_id": f"x{i}",
            "route": "chat.completions",
            "model": "Qwen/Qwen3-8B",
            "tools_json": json.dumps([TOOL]),
            "server_prompt": None,
            "server_output_text": text,
            "server_steps": steps,
            "served_finish_reason": "length" if i % 7 == 3 else None,
            "served_content": None,
        }
        for i, (text, steps) in enumerate(texts)
    ]


def _plain_tables(exs: list[dict], cfg: AuditConfig) -> tuple[list[dict], list[dict]]:
    resolver = ParserResolver(cfg)
    s_rows, c_rows = [], []
    for ex in exs:
        s, c = stream_exchange(dict(ex), cfg, resolver)
        s_rows.extend(s)
        c_rows.extend(c)
    return rows_table(s_rows, tables.STREAMS).to_pylist(), rows_table(c_rows, tables.CALLS).to_pylist()


pieces = st.sampled_from(
    ["hello ", "\n", _call("read", '{"path": "a.py"}'), _call("read", '{"path": "</tool_call>"}'), _call("x", "[1]"), "<tool_call>{", "</tool_call>", "<think>", "</think>", "é😀"]
)


@pytest.mark.parametrize("chunkings", [None, ("whole", "char", "recorded"), ("fixed-3",)], ids=["default", "forced", "no-recorded"])
def test_stream_batch_rows_are_stream_exchange_rows_in_order(chunkings):
    cfg = AuditConfig(chunkings=chunkings)

    @budget(40)
    @given(st.lists(st.tuples(st.lists(pieces, max_size=5).map("".join), st.lists(st.integers(0, 60), max_size=8)), min_size=1, max_size=6))
    def run(items):
        texts = []
        for text, cuts in items:
            cuts = sorted(min(c, len(text)) for c in cuts)
            steps = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])] if cuts else None
            texts.append((text, steps))
        exs = _exchanges(texts)
        got = stream_batch(pa.RecordBatch.from_pylist(exs), cfg)
        want_s, want_c = _plain_tables(exs, cfg)
        assert got["streams"].to_pylist() == want_s
        assert got["calls"].to_pylist() == want_c

    run()


def test_stream_batch_copies_the_new_sides_rows_only_when_it_is_the_old_sides_replay():
    """Same parser on both sides: the new rows are the old rows renamed (made by with_copies);
    a plugin on one side: its own rows."""
    exs = _exchanges([(_call("read", '{"path": "a.py"}') + " done", ["<tool_call>", '\n{"name": "read", "arguments": {"path": "a.py"}}\n</tool_call>', " done"])])
    got = stream_batch(pa.RecordBatch.from_pylist(exs), AuditConfig())["streams"].to_pylist()
    by_side = {}
    for r in got:
        by_side.setdefault(r["side"], []).append({k: v for k, v in r.items() if k != "side"})
    assert [r["side"] for r in got] == ["reference", "old", "old", "old", "new", "new", "new"]
    assert by_side["old"] == by_side["new"]
    assert [r["chunking"] for r in by_side["new"]] == ["parse", "recorded", "whole"]


# ------------------------------------------------------------------ decoded JSON: non-finite numbers
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: json.dumps(f)),
    st.integers(-(10**30), 10**30).map(str),
    st.builds(lambda d, e: f"{d}e{e}", st.integers(-99, 99), st.integers(-400, 400)),
    st.builds(lambda d, e: f"{d}.5E+{e}", st.integers(0, 9), st.integers(250, 320)),
    st.builds(lambda n, f: "1" * n + f, st.integers(300, 320), st.sampled_from(["", ".0", ".25"])),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e309", "1.7976931348623157e308", "0.0e0"]),
)
json_texts = st.recursive(
    numbers | st.text(max_size=4).map(json.dumps),
    lambda inner: st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]")
    | st.dictionaries(st.sampled_from(["name", "e", "NaN", "Infinity", "x"]), inner, max_size=3).map(
        lambda d: "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in d.items()) + "}"
    ),
    max_leaves=6,
)


@budget(400)
@given(json_texts)
def test_a_decoded_value_holding_a_non_finite_number_is_no_usable_json(text):
    value = json.loads(text)
    got = _checked(value, text, 0, len(text))
    if _has_non_finite(value):
        assert got is TOO_DEEP
    else:
        assert got is value


def test_non_finite_values_are_no_call():
    """NaN, infinities and numbers that overflow to infinity, with an exponent or without (309
    digits and a fraction: the text holds no N, I, e or E) make no call, streamed or whole."""
    for raw in ["1e999", "-Infinity", "NaN", "9" * 309 + ".5", "[1.5E+308, 2e308]"]:
        value = json.loads(raw)
        assert _has_non_finite(value)
        assert _checked(value, raw, 0, len(raw)) is TOO_DEEP
        text = '<tool_call>\n{"name": "f", "arguments": {"a": ' + raw + "}}\n</tool_call>"
        parsed = HermesParser(None).parse(text)
        assert parsed.calls == () and parsed.content == text
        got = replay_stream(HermesParser, None, [text[:40], text[40:]])
        assert got.calls == [] and got.content == text
    finite = '{"name": "read", "arguments": {"e": 1.5e10, "big": ' + "9" * 308 + ".5}}"
    assert _checked(json.loads(finite), finite, 0, len(finite)) == json.loads(finite)
    assert not math.isinf(float("9" * 308 + ".5"))


@budget(200)
@given(st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(), lambda x: st.lists(x) | st.dictionaries(st.text(), x), max_leaves=10))
def test_dumps_arguments_is_json_dumps_without_ascii_escapes(value):
    assert dumps_arguments(value) == json.dumps(value, ensure_ascii=False)


# ------------------------------------------------------------------ a block read on a stream's prefix
def _LIST_TRAILS(raw: str) -> bool:
    """``trailing`` of a family whose call list may be followed by prose (Mistral)."""
    return raw.startswith("[")


_BLOCK_PIECES = st.sampled_from(
    ['{"name": "f", "arguments": {"a": 1}}', "[1, 2]", '{"a": "</tool_call>"}', "{", '{"a": ', "12", '"s"', " ", "\n", "</tool_call>", "</tool", "[TOOL_CALLS]", "\n</x>", "text"]
)


@budget(400)
@given(
    st.lists(_BLOCK_PIECES, max_size=6).map("".join),
    st.integers(0, 3),
    st.sampled_from(["</tool_call>", ("</tool_call>", "[TOOL_CALLS]"), "\n</x>", ""]),
    st.booleans(),
    st.booleans(),
    st.sampled_from([None, _LIST_TRAILS]),
    st.booleans(),
)
@example('[{"a": 1}] then', 0, "</tool_call>", True, True, _LIST_TRAILS, False)  # a value with trailing text: an answer without an end marker
def test_read_json_block_on_a_prefix_without_end_marker_is_the_full_reading(text, start, ends, consume, open_end, trailing, final):
    from replay.parsers._block import read_json_block

    start = min(start, len(text))
    kw = dict(consume=consume, trailing=trailing, final=final, open_end=open_end)
    assert read_json_block(text, start, ends, **kw) == read_json_block(text, start, ends, prefix_shortcut=False, **kw)


# ------------------------------------------------------------------ the judge: own parse = the reference's
class _LateHermes(HermesParser):
    """A streaming fault to judge: the calls of a delta longer than 12 chars are lost."""

    def feed(self, delta):
        out = super().feed(delta)
        if out.calls and len(delta) > 12:
            out.calls = []
        return out


@pytest.mark.parametrize("spec", [None, "test_stream_equivalence:_LateHermes"], ids=["builtin", "plugin-as-reference"])
@budget(60)
@given(text=st.lists(pieces, max_size=5).map("".join), cuts=st.lists(st.integers(0, 60), max_size=6), truncated=st.booleans())
def test_judge_rows_are_the_same_when_the_own_parse_is_the_reference_object_or_an_equal_copy(spec, text, cuts, truncated):
    """A side whose parser is the reference's reuses the reference's parse object, and the judge
    then takes each row's differs_from_own_parse from its differs_from_reference; with an equal
    copy of that parse (another object) it compares them: the rows must be the same."""
    import copy

    from replay.stages.stream import plan_stream, replay_in_process
    from replay.judge import judge_side
    from replay.deadline import deadlines_installed

    cuts = sorted(min(c, len(text)) for c in cuts)
    steps = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    ex = _exchanges([(text, steps)])[0]
    ex["served_finish_reason"] = "length" if truncated else None
    cfg = AuditConfig(chunkings=("recorded", "whole", "char"), reference_parser=spec, old_parser=spec)
    with deadlines_installed():
        plan = plan_stream(ex, cfg, ParserResolver(cfg))
        assert not plan.done
        rep = replay_in_process(plan, plan.sides.old, plan.chunks["old"], 10)
    assert rep.parse is plan.ref_parse
    ns, nc = len(plan.streams), len(plan.calls)
    judge_side(plan, "old", "hermes", plan.chunks["old"], rep)
    shared = (plan.streams[ns:], plan.calls[nc:])
    del plan.streams[ns:], plan.calls[nc:]
    rep.parse = copy.deepcopy(rep.parse)
    judge_side(plan, "old", "hermes", plan.chunks["old"], rep)
    assert (plan.streams[ns:], plan.calls[nc:]) == shared


# ------------------------------------------------------------------ rows -> Arrow tables
def _values(t: pa.DataType):
    if pa.types.is_string(t):
        return st.one_of(st.text(max_size=5), st.sampled_from(["\ud800", "a\udfffb", "é😀"]))
    if pa.types.is_int32(t):
        return st.integers(-(2**31), 2**31 - 1)
    if pa.types.is_int64(t):
        return st.integers(-(2**63), 2**63 - 1)
    if pa.types.is_boolean(t):
        return st.booleans()
    if pa.types.is_timestamp(t):
        return st.datetimes(timezones=st.just(__import__("datetime").timezone.utc))
    if pa.types.is_list(t):
        return st.lists(_values(t.value_type) | st.none(), max_size=3)
    if pa.types.is_struct(t):
        return st.fixed_dictionaries({f.name: _values(f.type) | st.none() for f in t})
    raise AssertionError(t)


def _rows(schema: pa.Schema):
    row = st.fixed_dictionaries({}, optional={f.name: _values(f.type) | st.none() for f in schema} | {"extra": st.integers()})
    return st.lists(row, max_size=6)


def _from_pylist(rows, schema):
    """The rule rows_table had: Table.from_pylist, lone surrogates escaped on failure."""
    from replay.stages.rows import _utf8_safe

    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (UnicodeEncodeError, pa.ArrowException):
        return pa.Table.from_pylist([_utf8_safe(r) for r in rows], schema=schema)


@pytest.mark.parametrize("name", ["streams", "calls", "family_fit", "renders"])
def test_rows_table_is_from_pylist(name):
    schema = tables.TABLES[name]

    @budget(150)
    @given(_rows(schema))
    def run(rows):
        try:
            want = _from_pylist(rows, schema)
        except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
            with pytest.raises(type(exc)):
                rows_table(rows, schema)
            return
        got = rows_table(rows, schema)
        assert got.schema.equals(want.schema, check_metadata=True)
        assert got.equals(want)
        assert got.to_pylist() == want.to_pylist()

    run()
