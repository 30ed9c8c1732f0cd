"""The per-exchange stage functions, on hand-made exchanges rows."""

from __future__ import annotations

import json

from replay.runspec import AuditConfig
from replay.stages.context import ParserResolver
from replay.stages.rows import openai_tools
from replay.stages.stream import prompt_opens_reasoning, stream_exchange
from replay.stages.render import render_exchange
from replay.render import JsonToolsRenderer
from replay.tools import get_serializer

TOOL = {"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}
CALL = '<tool_call>\n{"name": "read", "arguments": {"path": "a.py"}}\n</tool_call>'


def exchange(**kw):
    base = {
        "exchange_id": "x1",
        "route": "chat.completions",
        "model": "Qwen/Qwen3-8B",
        "request_json": json.dumps({"messages": [{"role": "user", "content": "hi"}], "tools": [TOOL]}),
        "server_prompt": None,
        "server_output_text": None,
        "server_steps": None,
    }
    return {**base, **kw}


def test_prompt_opens_reasoning():
    assert prompt_opens_reasoning("<|im_start|>assistant\n<think>\n")
    assert prompt_opens_reasoning("...<｜Assistant｜><think>")
    assert not prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not prompt_opens_reasoning(None)


def test_stream_exchange_splits_reasoning_when_the_prompt_opened_it():
    text = "The user wants a.py; I could write <tool_call> here.\n</think>\n\n" + CALL
    ex = exchange(server_prompt="<|im_start|>assistant\n<think>\n", server_output_text=text)
    cfg = AuditConfig(chunkings=("whole", "char"))
    streams, calls = stream_exchange(ex, cfg, ParserResolver(cfg))
    ref = next(r for r in streams if r["side"] == "reference")
    assert ref["reasoning_open"] is True and ref["calls_whole"] == 1 and ref["content"] == ""
    assert ref["reasoning"].startswith("The user wants a.py")
    assert {(r["side"], r["chunking"], r["calls_streamed"]) for r in streams} == {
        ("reference", "parse", 1),
        ("old", "parse", 1), ("old", "whole", 1), ("old", "char", 1),
        ("new", "parse", 1), ("new", "whole", 1), ("new", "char", 1),
    }
    assert all(c["matches_whole"] and c["arguments"] == '{"path": "a.py"}' for c in calls)
    # without the opened prompt the same text has no reasoning section: the call is still found
    streams, _ = stream_exchange(exchange(server_output_text=text), cfg, ParserResolver(cfg))
    assert next(r for r in streams if r["side"] == "reference")["reasoning"] == ""


def test_stream_exchange_records_bad_recorded_steps_and_unknown_family():
    cfg = AuditConfig(chunkings=("recorded", "whole"))
    streams, _ = stream_exchange(exchange(server_output_text=CALL, server_steps=["nope"]), cfg, ParserResolver(cfg))
    bad = [r for r in streams if r["chunking"] == "recorded"]
    assert bad and all("do not join" in r["error"] for r in bad)
    streams, calls = stream_exchange(exchange(model="acme/unknown-7b", server_output_text=CALL), cfg, ParserResolver(cfg))
    assert calls == [] and "no tool parser family" in streams[0]["error"]


def test_render_exchange_rows_and_errors():
    cfg = AuditConfig(renderer=JsonToolsRenderer())
    sers = {side: get_serializer(spec) for side, spec in cfg.serializer_specs().items()}
    rows = {r["side"]: r for r in render_exchange(exchange(), cfg, sers)}
    assert rows["old"]["leaked_nulls"] == [{"tool_index": 0, "path": "$.function.description"}, {"tool_index": 0, "path": "$.function.strict"}]
    assert rows["new"]["leaked_nulls"] == [] and rows["new"]["prompt_sha256"] == rows["reference"]["prompt_sha256"]
    assert rows["old"]["prompt_sha256"] != rows["new"]["prompt_sha256"]
    broken = exchange(request_json=json.dumps({"messages": [], "tools": [{"type": "function", "function": {}}]}))
    rows = render_exchange(broken, cfg, sers)
    assert [r["side"] for r in rows] == ["old", "new", "reference"] and all("name" in r["error"] for r in rows)


def test_openai_tools_converts_anthropic_and_responses_forms():
    anthropic = [{"name": "read", "description": "d", "input_schema": {"type": "object"}}]
    assert openai_tools("messages", anthropic) == [{"type": "function", "function": {"name": "read", "description": "d", "parameters": {"type": "object"}}}]
    responses = [{"type": "function", "name": "read", "parameters": {"type": "object"}, "strict": True}]
    assert openai_tools("responses", responses) == [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}, "strict": True}}]
    assert openai_tools("chat.completions", []) is None


def test_a_hanging_parser_is_stopped_and_recorded(tmp_path):
    from replay.parsers.hermes import HermesParser

    class Hangs(HermesParser):
        def feed(self, delta):
            while True:
                pass

    cfg = AuditConfig(chunkings=("whole",), replay_timeout=0.2, old_parser="hang")
    resolver = ParserResolver(cfg)
    resolver.plugins["hang"] = Hangs
    streams, _ = stream_exchange(exchange(server_output_text=CALL), cfg, resolver)
    old = {r["chunking"]: r for r in streams if r["side"] == "old"}
    assert old["parse"].get("error") is None and old["parse"]["calls_streamed"] == 1
    assert "ReplayTimeout: took more than 0.2 s" in old["whole"]["error"]
    new = {r["chunking"]: r for r in streams if r["side"] == "new"}
    assert new["whole"]["calls_streamed"] == 1  # the audit went on


def test_arguments_that_utf8_cannot_hold_are_written_not_lost(tmp_path):
    """A "\\ud800" escape decodes to a lone surrogate, which Parquet (UTF-8) cannot store: the
    row is written with the escape, the run goes on, and the JSON text still counts as JSON."""
    import pyarrow.parquet as pq

    from replay import tables
    from replay.stages.rows import rows_table
    from replay.runner.driver import write_atomic

    text = '<tool_call>{"name": "f", "arguments": {"a": "\\ud800"}}</tool_call>'
    cfg = AuditConfig(chunkings=("whole",))
    streams, calls = stream_exchange(exchange(server_output_text=text), cfg, ParserResolver(cfg))
    assert all(c["arguments_json_ok"] for c in calls) and len(calls) == 5  # reference; old, new x (parse, whole)
    write_atomic(tmp_path / "calls.parquet", rows_table(calls, tables.CALLS))
    got = pq.read_table(tmp_path / "calls.parquet").column("arguments").to_pylist()
    assert got == ['{"a": "\\ud800"}'] * 5  # the JSON escape, as six ASCII characters


def test_non_finite_numbers_are_no_json_arguments():
    """Python's json reads NaN, Infinity and 1e999; JSON has none, so such a body is no call (its
    text stays content) in every JSON family, whole and streamed alike."""
    from replay.parsers import HermesParser, KimiK2Parser, MistralParser
    from replay.stream import check_stream_equals_whole

    texts = {
        HermesParser: '<tool_call>{"name": "f", "arguments": {"a": NaN}}</tool_call>',
        MistralParser: '[TOOL_CALLS]f[ARGS]{"n": -Infinity}',
        KimiK2Parser: "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
        '{"n": 1e999}<|tool_call_end|><|tool_calls_section_end|>',
    }
    for cls, text in texts.items():
        whole = cls().parse(text)
        assert whole.calls == () and whole.content, cls.name
        assert check_stream_equals_whole(cls, text, ["whole", "char", "fixed-3"]) == [], cls.name


def test_judge_side_compares_each_call_with_the_reference_by_json_value() -> None:
    """A call matches the whole-text parse when name and arguments are the same JSON value
    (spacing, key order and 1 vs 1.0 ignored); other arguments, another name, text that is not
    JSON, or an index the reference does not have is a mismatch (``matches_whole`` False)."""
    from replay.parsers.base import ParseResult, ToolCall
    from replay.stages.stream import SideReplay, StreamPlan
    from replay.judge import judge_side
    from replay.stream import Assembled, AssembledCall

    plan = StreamPlan(xid="x1", text="t", ref_calls=[ToolCall("read", '{"path": "a.py", "n": 1}'), ToolCall("ls", "{}")])
    rep = SideReplay(
        parse=ParseResult(content="", calls=(ToolCall("read", '{"n":1.0,"path":"a.py"}'), ToolCall("ls", '{"x": 1}'))),
        streams=[
            Assembled(content="", calls=[AssembledCall(0, "read", '{"path": "b.py", "n": 1}'), AssembledCall(1, "cat", "{}")]),
            Assembled(content="", calls=[AssembledCall(0, "read", '{"path": "a.py", "n": 1'), AssembledCall(2, "ls", "{}")]),
        ],
    )
    judge_side(plan, "old", "hermes", [("whole", ["t"]), ("char", ["t"])], rep)
    got = [(c["chunking"], c["index"], c["matches_whole"]) for c in plan.calls]
    assert got == [("parse", 0, True), ("parse", 1, False), ("whole", 0, False), ("whole", 1, False), ("char", 0, False), ("char", 2, False)]


def test_a_sides_chunkings_are_cut_at_the_reference_markers_and_its_own() -> None:
    """plan_stream cuts each side's chunkings (and the report's exemplars re-cut them) at the
    reference family's markers followed by that side's parser's own markers."""
    from replay.parsers.hermes import HermesParser
    from replay.stages.context import _Sides
    from replay.sides import RemoteParser

    class Extra(HermesParser):
        markers = ("<call>",)

    remote = RemoteParser(name="w", markers=("[TOOL]",), family="hermes", side="new")
    sides = _Sides(reference=HermesParser, old=Extra, new=remote)
    ref = tuple(HermesParser.markers)
    assert ref and sides.cut_markers("old") == ref + ("<call>",)
    assert sides.cut_markers("new") == ref + ("[TOOL]",)


def test_default_chunkings_per_side_builtin_and_plugin():
    """Defaults (issue 9 item 4): a side with the family's built-in parser replays recorded and
    whole; a plugin side the synthetic chunkings plus split-all (every two-way split, none cut
    inside a marker); --chunkings forces one set on both sides."""
    from replay.parsers.hermes import HermesParser
    from replay.stages.stream import chunking_plan, plan_stream
    from replay.stream import two_way_splits

    class Plugin(HermesParser):  # same family name: replaces only Hermes' parser
        pass

    import sys
    import types

    mod = types.ModuleType("_plugin_for_chunkings")
    mod.Plugin = Plugin
    sys.modules["_plugin_for_chunkings"] = mod
    try:
        cfg = AuditConfig(new_parser="_plugin_for_chunkings:Plugin")
        ex = exchange(server_output_text=CALL, server_steps=[CALL[:7], CALL[7:]])
        plan = plan_stream(ex, cfg, ParserResolver(cfg))
        assert [c for c, _ in plan.chunks["old"]] == ["recorded", "whole"]
        new = [c for c, _ in plan.chunks["new"]]
        splits = [f"split-{k}" for k, _ in two_way_splits(CALL, HermesParser.markers)]
        assert new == ["recorded", "whole", "char", "fixed-2", "fixed-3", "fixed-5", "fixed-8", "fixed-13", "fixed-40", *splits]
        assert "split-3" not in new and len(splits) == len(CALL) - 1 - (len("<tool_call>") - 1) - (len("</tool_call>") - 1)  # no cut inside a marker
        streams, _ = stream_exchange(ex, cfg, ParserResolver(cfg))
        assert sum(r["side"] == "new" for r in streams) == 1 + len(new) and sum(r["side"] == "old" for r in streams) == 3
        plan_meta = chunking_plan(cfg)
        assert plan_meta["old"] == {"parser": "built-in", "in_process": True, "builtin": ["recorded", "whole"]}
        assert plan_meta["new"]["other"][-1] == "split-all" and plan_meta["forced"] is False
        # a completion over 2,000 chars gets no two-way splits
        long = "x" * 2001 + CALL
        plan = plan_stream(exchange(server_output_text=long), cfg, ParserResolver(cfg))
        assert not any(c.startswith("split-") for c, _ in plan.chunks["new"])
        forced = AuditConfig(new_parser="_plugin_for_chunkings:Plugin", chunkings=("whole", "char"))
        plan = plan_stream(ex, forced, ParserResolver(forced))
        assert [c for c, _ in plan.chunks["old"]] == [c for c, _ in plan.chunks["new"]] == ["whole", "char"]
    finally:
        del sys.modules["_plugin_for_chunkings"]


def test_tool_lists_are_serialized_once_and_rows_stay_the_same():
    """A tool list sent again is serialized once per process (content hash); the rows of the
    second exchange are those of the first, a serializer's error included."""
    calls = []

    def counting(tool):
        calls.append(tool["function"]["name"])
        if tool["function"]["name"] == "bad":
            raise ValueError("no bad tools")
        return get_serializer("model-dump")(tool)

    cfg = AuditConfig(renderer=JsonToolsRenderer())
    sers = {"old": counting, "new": get_serializer("client-fields"), "reference": get_serializer("as-sent")}
    first = render_exchange(exchange(exchange_id="a"), cfg, sers)
    second = render_exchange(exchange(exchange_id="b"), cfg, sers)
    assert calls == ["read"]  # serialized for "a" only
    assert [{**r, "exchange_id": None} for r in first] == [{**r, "exchange_id": None} for r in second]
    assert first[0]["leaked_nulls"] == [{"tool_index": 0, "path": "$.function.description"}, {"tool_index": 0, "path": "$.function.strict"}]
    bad = {"type": "function", "function": {"name": "bad"}}
    req = json.dumps({"messages": [], "tools": [bad]})
    errs = [render_exchange(exchange(exchange_id=x, request_json=req), cfg, sers)[0]["error"] for x in "cd"]
    assert errs == ["ValueError: no bad tools"] * 2 and calls == ["read", "bad"]
