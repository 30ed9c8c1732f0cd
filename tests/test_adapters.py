"""Framework adapters (replay/adapters/) against test doubles of each framework's protocol.

- TensorRT-LLM: :class:`framework_fakes.MiniTRT` (cannot be installed here), named as a
  ``file.py:attr`` spec: the sequence ``parse_streaming_increment`` per delta then ``finish``.
- SGLang: a fake ``sglang`` package written to a temporary folder (its ``__init__`` files raise,
  as importing the real ones would pull torch), in the two serving styles the adapter reproduces
  (0.5.4: no ``parse_stream_end``; 0.5.23: with it), and the end-of-stream argument rule of each.
- vLLM: :class:`framework_fakes.MiniVLLM` on the marker tokenizer: the previous/current/delta text
  and token ids of each call, and the server's replacement of the last step's tool-call delta.
- The property: an adapted parser that is correct gives streamed == whole under any chunking.

The real releases are audited in test_engines_sglang.py and test_engines_vllm.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hypo import examples

import framework_fakes as ff
from replay import adapters
from replay.adapters import FrameworkToolCall, protocol_of
from replay.adapters import sglang as sgl
from replay.adapters import vllm as vll
from replay.parsers import UnknownParserError, get_parser
from replay.stream import check_stream_equals_whole, forbidden_cuts, replay_stream

FAKES = str(Path(ff.__file__).resolve())
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "read", "description": "Read a file"}},
]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Zürich"}}</tool_call>'


# --------------------------------------------------------------------------- spec resolution
def test_protocols_are_recognised():
    assert protocol_of(ff.MiniTRT) == "trtllm"
    assert protocol_of(ff.MiniVLLM) == "vllm"
    # a class of the detector protocol defined in an sglang module is SGLang's even with finish
    cls = type("D", (ff.MiniDetector,), {"__module__": "sglang.srt.function_call.x"})
    assert protocol_of(cls) == "sglang"
    # a user's subclass of an SGLang detector, in a file of their own, is SGLang's too
    assert protocol_of(type("S", (cls,), {"__module__": "replay_plugin_123"})) == "sglang"
    assert protocol_of(ff.MiniDetector, "sglang.srt.function_call.function_call_parser:MiniDetector") == "sglang"
    no_finish = type("N", (), {"detect_and_parse": lambda s, t, tools: None, "parse_streaming_increment": lambda s, d, tools: None})
    assert protocol_of(no_finish) == "sglang"
    assert protocol_of(ff.Item) is None
    assert protocol_of(ff.MiniTRT()) is None  # an instance is not a class


def test_get_parser_wraps_a_framework_class_and_keeps_plain_errors():
    cls = get_parser(f"{FAKES}:MiniTRT")
    assert cls.framework == "trtllm" and cls.parser_class.__name__ == "MiniTRT"
    assert cls.name == "trtllm.MiniTRT"  # no family known for it: replaces every family's parser
    with pytest.raises(UnknownParserError):
        get_parser(cls.name)  # so the pipeline's family rule sees no built-in family in it
    with pytest.raises(UnknownParserError):
        get_parser(f"{FAKES}:Item")  # neither our protocol nor a framework's
    with pytest.raises(adapters.AdapterError, match="sglang is not installed"):
        get_parser("sglang/qwen25")  # this interpreter has no sglang
    with pytest.raises(adapters.AdapterError, match="not importable"):
        get_parser("vllm/hermes")


def test_family_names_come_from_the_framework_registry_name():
    assert adapters.adapter_identity("sglang", "qwen25", object, ("<tool_call>\n", "\n</tool_call>")) == ("hermes", ("<tool_call>", "</tool_call>"))
    assert adapters.adapter_identity("sglang", "deepseekv3", object, ())[0] == "deepseek_v3"
    assert adapters.adapter_identity("vllm", "kimi_k2", object, ())[0] == "kimi_k2"
    # no family: the framework's own tokens, stripped, are the markers
    assert adapters.adapter_identity("sglang", "gigachat3", object, ("<|function_call|>\n", "")) == ("sglang.gigachat3", ("<|function_call|>",))


# --------------------------------------------------------------------------- TensorRT-LLM
def _instance(adapter):
    return adapter._parser


def test_trtllm_call_sequence_ends_with_finish():
    cls = get_parser(f"{FAKES}:MiniTRT")
    p = cls(TOOLS)
    events = [p.feed(d) for d in ("Hi ", CALL, " bye <tool")]
    events.append(p.finish())
    log = _instance(p).log
    assert log == [
        ("parse_streaming_increment", "Hi ", ["get_weather", "read"]),
        ("parse_streaming_increment", CALL, ["get_weather", "read"]),
        ("parse_streaming_increment", " bye <tool", ["get_weather", "read"]),
        ("finish", ["get_weather", "read"]),
    ]
    assert [e.content for e in events] == ["Hi ", "", " bye ", "<tool"]
    assert [(c.index, c.name, c.arguments) for c in events[1].calls] == [(0, "get_weather", '{"city": "Zürich"}')]


def test_trtllm_whole_text_and_no_tools():
    cls = get_parser(f"{FAKES}:MiniTRT")
    res = cls(TOOLS).parse("Hi " + CALL)
    assert res.content == "Hi " and res.calls == (FrameworkToolCall("get_weather", '{"city": "Zürich"}', index=0),)
    p = cls(None)  # trtllm-serve runs no tool parser when the request has no tools
    assert p.parse(CALL).content == CALL and p.feed(CALL).content == CALL and not p.finish()
    assert p._parser is None


def test_trtllm_planted_finish_bug_is_caught_by_the_property():
    text = "Hi " + CALL + " and <tool_call>{\"name\": \"read\""
    good = get_parser(f"{FAKES}:MiniTRT")
    bad = get_parser(f"{FAKES}:LeakyFinishTRT")
    assert check_stream_equals_whole(good, text, ["whole", "char", "fixed-5"], tools=TOOLS) == []
    failures = check_stream_equals_whole(bad, text, ["whole", "char"], tools=TOOLS)
    assert failures and "content" in failures[0].problems[0]


# --------------------------------------------------------------------------- SGLang (fake package)
FAKE_FCP = '''
from framework_fakes import FirstCallDetector, MiniDetector, LaggingDetector

class FunctionCallParser:
    ToolCallParserEnum = {"mini": MiniDetector, "qwen25": MiniDetector, "lagging": LaggingDetector, "firstonly": FirstCallDetector}

    def __init__(self, tools, tool_call_parser, **kwargs):
        self.detector = self.ToolCallParserEnum[tool_call_parser]()
        self.tools = tools
        CREATED.append(self.detector)

    def has_tool_call(self, text):
        return bool(self.tools) and self.detector.has_tool_call(text)

    def parse_non_stream(self, full_text):
        if not self.tools:
            return full_text, []
        r = self.detector.detect_and_parse(full_text, self.tools)
        return (r.normal_text, r.calls) if r.calls else (full_text, [])

    def parse_stream_chunk(self, chunk_text):
        if not self.tools:
            return chunk_text, []
        r = self.detector.parse_streaming_increment(chunk_text, self.tools)
        return r.normal_text, r.calls
'''
FAKE_END = '''
    def parse_stream_end(self):
        r = self.detector.finish(self.tools)
        return r.normal_text, r.calls
'''
FAKE_PROTOCOL = '''
class _F:
    def __init__(self, d):
        self.name = d["name"]; self.parameters = d.get("parameters"); self.description = d.get("description")

class Tool:
    def __init__(self, d):
        self.type = d.get("type", "function"); self.function = _F(d["function"])

    @classmethod
    def model_validate(cls, d):
        return cls(d)
'''


@pytest.fixture(params=["0.5.4", "0.5.23"])
def fake_sglang(request, tmp_path, monkeypatch):
    """A fake sglang install in the style of release ``request.param``; its ``__init__`` files
    raise as the real ones would without torch. Yields the list of detectors created."""
    root = tmp_path / "sglang"
    for pkg in ("", "srt", "srt/function_call", "srt/entrypoints", "srt/entrypoints/openai"):
        (root / pkg).mkdir(parents=True, exist_ok=True)
        (root / pkg / "__init__.py").write_text("" if pkg.count("/") else "raise ImportError('this __init__ imports torch')\n")
    (root / "srt/function_call/function_call_parser.py").write_text("CREATED = []\n" + FAKE_FCP + (FAKE_END if request.param == "0.5.23" else ""))
    (root / "srt/entrypoints/openai/protocol.py").write_text(FAKE_PROTOCOL)
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = {k: v for k, v in sys.modules.items() if k == "sglang" or k.startswith("sglang.")}
    for k in saved:
        del sys.modules[k]
    sgl._CACHE.clear()
    finders = list(sys.meta_path)
    yield request.param
    for k in [k for k in sys.modules if k == "sglang" or k.startswith("sglang.")]:
        del sys.modules[k]
    sys.modules.update(saved)
    sys.meta_path[:] = finders
    sgl._CACHE.clear()


def _created():
    return sys.modules["sglang.srt.function_call.function_call_parser"].CREATED


def test_sglang_stubs_skip_the_package_init(fake_sglang):
    cls = get_parser("sglang/mini")
    assert cls.serving == fake_sglang and cls.name == "sglang.mini"
    assert get_parser("sglang/qwen25").name == "hermes"
    # the fake sglang/__init__.py raises: resolving worked, so the stub stood in for it
    assert sys.modules["sglang"].__path__[0].endswith("sglang") and sys.modules["sglang"].__spec__ is None
    with pytest.raises(adapters.AdapterError, match="no tool-call parser 'nope'.*lagging, mini, qwen25"):
        get_parser("sglang/nope")


def test_sglang_call_sequence(fake_sglang):
    cls = get_parser("sglang/mini")
    p = cls(TOOLS)
    events = [p.feed(d) for d in ("Hi ", CALL, " <tool")]
    events.append(p.finish())
    (det,) = _created()
    names = ["get_weather", "read"]
    expected = [
        ("parse_streaming_increment", "Hi ", names),
        ("parse_streaming_increment", CALL, names),
        ("parse_streaming_increment", " <tool", names),
    ]
    if fake_sglang == "0.5.23":
        expected.append(("finish", names))  # parse_stream_end on the finishing step
    assert det.log == expected
    joined = "".join(e.content for e in events)
    # 0.5.4 has no end-of-stream flush: the held "<tool" is never sent
    assert joined == ("Hi  <tool" if fake_sglang == "0.5.23" else "Hi  ")
    # the whole-text path: has_tool_call, then detect_and_parse on a new detector; the index the
    # response carries is tool_index (-1) in 0.5.4 and the call's position in 0.5.23
    res = cls(TOOLS).parse("Hi " + CALL)
    assert [d.log for d in _created()[1:]] == [[("has_tool_call", "Hi " + CALL), ("detect_and_parse", "Hi " + CALL, names)]]
    assert res.content == "Hi " and [c.index for c in res.calls] == ([-1] if fake_sglang == "0.5.4" else [0])


def test_sglang_without_tools_is_plain_content(fake_sglang):
    p = get_parser("sglang/mini")(None)
    assert p.parse(CALL).content == CALL and p.feed(CALL).content == CALL and not p.finish()
    assert _created() == []


def test_sglang_sends_unstreamed_arguments_at_the_end(fake_sglang):
    got = replay_stream(get_parser("sglang/lagging"), TOOLS, ["Hi ", CALL])
    assert [(c.index, c.name, c.arguments) for c in got.calls] == [(0, "get_weather", '{"city": "Zürich"}')]


def test_sglang_module_attr_class_is_registered_for_its_parser(fake_sglang):
    cls = get_parser("sglang.srt.function_call.function_call_parser:MiniDetector")
    assert cls.framework == "sglang"  # named through an sglang module, though defined elsewhere
    assert cls.name == "sglang.mini" and cls.registry_name == "mini"  # its first registry name
    assert replay_stream(cls, TOOLS, ["Hi ", CALL]).calls[0].name == "get_weather"


AGENT = Path(__file__).resolve().parents[1] / "samples" / "coding-agent.jsonl"


def _audit(tmp_path, *args):
    from typer.testing import CliRunner

    from replay.cli import app

    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["audit", str(AGENT), "--out", str(out), "--quiet", *args], env={"COLUMNS": "200"})
    return out, result


def _verdict(out, check):
    from replay.sql import connect, run_query

    rows = run_query(connect(out), "verdicts").to_pylist()
    return next(r for r in rows if r["check"] == check)


def test_reference_parser_framework_spec_runs_in_process(fake_sglang, tmp_path):
    """``--reference-parser sglang/mini`` with SGLang importable here (the fake package): the
    reference whole-text parse of every raw completion is the framework detector's, made in this
    process, and both sides are judged against it (issue 10 part 3)."""
    import pyarrow.parquet as pq

    out, result = _audit(tmp_path, "--reference-parser", "sglang/mini")
    assert result.exit_code == 0, result.output
    texts = {r["exchange_id"]: r["server_output_text"] for r in pq.read_table(out / "exchanges.parquet").to_pylist()}
    # each of the 7 completions went through the detector here, as SGLang's server sends it:
    # has_tool_call first, detect_and_parse for the 6 that hold a call
    asked = {e[1] for d in _created() for e in d.log if e[0] == "has_tool_call"}
    parsed = {e[1] for d in _created() for e in d.log if e[0] == "detect_and_parse"}
    assert asked >= set(texts.values()) and len(texts) == 7
    assert parsed == {t for t in texts.values() if ff.START in t} and len(parsed) == 6
    streams = [r for r in pq.read_table(out / "streams.parquet").to_pylist() if r["side"] == "reference"]
    assert [r["parser"] for r in streams] == ["sglang.mini"] * 7
    ref_calls = {}
    for r in pq.read_table(out / "calls.parquet").to_pylist():
        if r["side"] == "reference":
            ref_calls.setdefault(r["exchange_id"], []).append((r["name"], json.loads(r["arguments"])))
    assert ref_calls == {x: ff.whole(t)[1] for x, t in texts.items() if ff.whole(t)[1]}
    assert sum(len(v) for v in ref_calls.values()) == 7
    semantic = _verdict(out, "semantic-diff")
    assert semantic["same-ok"] + semantic["unreliable"] == semantic["exchanges"] == 7
    assert "(reference: the whole-text parse of `sglang/mini`)" in (out / "report.md").read_text(encoding="utf-8")


def test_reference_parser_framework_fault_reaches_the_verdicts(fake_sglang, tmp_path):
    """A framework reference whose whole-text parse keeps only the first call: the one agent turn
    with two calls (turn 3) is judged against it, both built-in sides differ from it alike
    (still-wrong on semantic-diff), and no other exchange changes."""
    out, result = _audit(tmp_path, "--reference-parser", "sglang/firstonly")
    assert result.exit_code == 0, result.output
    semantic = _verdict(out, "semantic-diff")
    assert semantic["still-wrong"] == 1 and semantic["same-ok"] + semantic["unreliable"] == 6


def test_reference_parser_framework_missing_is_a_usage_error(tmp_path, monkeypatch):
    """Where the framework is not importable, the reference framework spec stops the audit before
    any work, exit 2, with one line naming the option and how to run it."""
    import importlib.util

    for framework, spec in (("sglang", "sglang/qwen25"), ("vllm", "vllm/hermes")):
        if importlib.util.find_spec(framework) is not None:
            continue
        out, result = _audit(tmp_path, "--reference-parser", spec)
        assert result.exit_code == 2, result.output
        msg = " ".join(result.output.split())
        assert f"error: --reference-parser {spec}: {framework} is not importable in {sys.executable}" in msg
        assert f"--new-parser {spec} --new-python VENV/bin/python" in msg
        assert not (out / "streams.parquet").exists()


def test_reference_parser_help_names_the_framework_specs():
    from typer.testing import CliRunner

    from replay.cli import app

    for command in ("audit", "stream"):
        text = " ".join(CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output.split())
        assert "--reference KEY=VALUE" in text and "sglang/NAME, vllm/NAME, trtllm/NAME" in text
        assert "must be importable by the interpreter running replay" in text


def test_unstreamed_argument_rules_of_each_release():
    det = SimpleNamespace(prev_tool_call_arr=[{"name": "f", "arguments": {"a": "ü"}}], streamed_args_for_tool=['{"a": '])
    assert sgl.unstreamed_arguments(det, new_rule=False) == (0, '"ü"}')
    assert sgl.unstreamed_arguments(det, new_rule=True) == (0, '"ü"}')
    # streamed text that is inside the expected text but not its start: 0.5.4 removes it wherever
    # it is, 0.5.23 sends nothing
    det.streamed_args_for_tool = ['"a": "ü"']
    assert sgl.unstreamed_arguments(det, new_rule=False) == (0, "{}")
    assert sgl.unstreamed_arguments(det, new_rule=True) is None
    # 0.5.23 takes string arguments as they are; 0.5.4 dumps them as a JSON string
    det.prev_tool_call_arr = [{"name": "f", "arguments": '{"a": 1}'}]
    det.streamed_args_for_tool = ['{"a"']
    assert sgl.unstreamed_arguments(det, new_rule=True) == (0, ": 1}")
    assert sgl.unstreamed_arguments(det, new_rule=False) is None  # '{"a"' is not in '"{\\"a\\": 1}"'
    det.streamed_args_for_tool = []
    assert sgl.unstreamed_arguments(det, new_rule=True) is None


# --------------------------------------------------------------------------- vLLM (fake class)
@pytest.fixture(scope="module")
def vllm_cls():
    pytest.importorskip("tokenizers")
    return get_parser(f"{FAKES}:MiniVLLM")


def test_vllm_call_sequence_and_token_ids(vllm_cls):
    p = vllm_cls(TOOLS)
    tok = p._tok
    deltas = ["Hi ", CALL, " ok"]
    events = [p.feed(d) for d in deltas]
    events.append(p.finish())
    log = p._parser.log
    assert log[0] == ("adjust_request",)
    prev_text, prev_ids = "", []
    for entry, delta in zip(log[1:], deltas):
        ids = tok.encode(delta, add_special_tokens=False)
        assert entry == ("stream", prev_text, prev_text + delta, delta, prev_ids, prev_ids + ids, ids)
        prev_text, prev_ids = prev_text + delta, prev_ids + ids
    start_id = tok.get_vocab()["<tool_call>"]
    assert tok.encode(CALL, add_special_tokens=False).count(start_id) == 1  # the marker is one token
    assert len(log) == 4
    # each step's delta is sent one step late; finish sends the last
    assert [e.content for e in events] == ["", "Hi ", "", " ok"]
    assert [(c.index, c.name) for c in events[2].calls] == [(0, "get_weather")]


def test_vllm_finish_reason_is_the_servers_own(vllm_cls):
    """vLLM 0.11's finishing chunk says ``tool_calls`` when the parser's ``prev_tool_call_arr``
    holds a call, else ``stop``, whatever was streamed: a parser that keeps a call there and
    streams none (QuietVLLM) leaves the client with no call and ``finish_reason: tool_calls``."""
    p = vllm_cls(TOOLS)
    for d in ("Hi ", CALL, " ok"):
        p.feed(d)
    assert p.finish().finish_reason == "tool_calls"
    p = vllm_cls(TOOLS)
    for d in ("Hi ", "there"):
        p.feed(d)
    assert p.finish().finish_reason == "stop"
    quiet = get_parser(f"{FAKES}:QuietVLLM")
    got = replay_stream(quiet, TOOLS, ["Hi ", CALL, " ok"])
    assert (got.content, got.calls, got.finish_reason) == ("Hi  ok", [], "tool_calls")
    assert replay_stream(quiet, TOOLS, ["Hi ", CALL], finish_reason="length").finish_reason == "length"  # the capture's own wins


@pytest.mark.parametrize("where", ["in process", "worker"])
def test_vllm_own_finish_reason_reaches_the_verdicts(vllm_cls, tmp_path, where):
    """QuietVLLM as the new side, here and in a worker (``--new-python``): each reliable exchange
    with calls of the coding agent (3: turns 1, 2, 3; 4-6 are unreliable, 7 has none) is broken on
    finish-reason (tool_calls with no call) and on dropped-call; the old built-in side is right."""
    from replay.sql import connect, run_query

    worker = ["--new-python", sys.executable] if where == "worker" else []
    out, result = _audit(tmp_path, "--new-parser", f"{FAKES}:QuietVLLM", "--chunkings", "whole,char", *worker)
    assert result.exit_code == 0, result.output
    rows = {r["check"]: r for r in run_query(connect(out), "verdicts").to_pylist()}
    for check in ("finish-reason", "dropped-call"):
        assert (rows[check]["broken"], rows[check]["same-ok"], rows[check]["unreliable"]) == (3, 1, 3), check
    reasons = connect(out).execute(
        "SELECT DISTINCT finish_reason FROM streams WHERE side = 'new' AND chunking <> 'parse' AND calls_whole > 0"
    ).fetchall()
    assert reasons == [("tool_calls",)]


def test_vllm_last_step_tool_delta_is_replaced_by_the_remaining_arguments(vllm_cls):
    # the call completes in the last step: vLLM replaces that step's delta (name and arguments)
    # by json.dumps(prev_tool_call_arr[-1]["arguments"]) minus what was streamed before it
    got = replay_stream(vllm_cls, TOOLS, ["Hi ", CALL])
    assert got.content == "Hi "
    assert [(c.index, c.name, c.arguments) for c in got.calls] == [(0, None, '{"city": "Zürich"}')]


def test_vllm_whole_text_paths(vllm_cls):
    res = vllm_cls(TOOLS).parse("Hi " + CALL)
    assert res.content == "Hi " and res.calls == (FrameworkToolCall("get_weather", '{"city": "Zürich"}', index=0),)
    assert vllm_cls(TOOLS).parse("plain").content == "plain"  # tools_called False: the text
    p = vllm_cls(None)
    assert p.parse(CALL).content == CALL and p.feed(CALL).content == CALL and not p.finish()


def test_marker_tokenizer_spells_bytes_and_keeps_markers_whole():
    pytest.importorskip("tokenizers")
    tok = vll.marker_tokenizer(("<tool_call>", "</tool_call>"))
    text = 'a<tool_call>{"x": "Zürich"}</tool_call>'
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text
    assert len(ids) == 1 + 1 + len('{"x": "Zürich"}'.encode()) + 1


# --------------------------------------------------------------------------- the property
CONTENT = st.text(alphabet="ab Zü\n{}\"", max_size=6)
ARGS = st.dictionaries(st.sampled_from(["city", "n", "q"]), st.one_of(st.integers(-5, 99), st.text(alphabet="xü \"\\", max_size=4)), max_size=2)


@st.composite
def completions(draw, *, tail=True):
    parts = [draw(CONTENT)]
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(["get_weather", "read"]))
        parts.append(ff.START + json.dumps({"name": name, "arguments": draw(ARGS)}, ensure_ascii=draw(st.booleans())) + ff.END)
        parts.append(draw(CONTENT))
    if tail:
        parts.append(draw(st.sampled_from(["", "<tool", '<tool_call>{"name": "read"'])))
    return "".join(parts)


def _chunk(draw, text, forced=()):
    bad = forbidden_cuts(text, (ff.START, ff.END))
    cuts = draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=12)) | set(forced)
    points = sorted(c for c in cuts if 0 < c < len(text) and c not in bad)
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)])] if text else []


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_trtllm_adapter(data):
    text = data.draw(completions())
    deltas = _chunk(data.draw, text)
    assert check_stream_equals_whole(get_parser(f"{FAKES}:MiniTRT"), text, [("drawn", deltas)], tools=TOOLS) == []


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_property_sglang_adapter(fake_sglang, data):
    # 0.5.4 never flushes at the end: its detectors are correct only on text that leaves nothing held
    text = data.draw(completions(tail=fake_sglang == "0.5.23"))
    deltas = _chunk(data.draw, text)
    assert check_stream_equals_whole(get_parser("sglang/mini"), text, [("drawn", deltas)], tools=TOOLS) == []


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_property_vllm_adapter(vllm_cls, data):
    # vLLM has no end-of-stream hook and replaces a last step that carries a call: correct
    # parsers stream equal to whole when the last call closes before the last step
    text = data.draw(completions(tail=False)) + "ok"
    end = text.rfind(ff.END)
    deltas = _chunk(data.draw, text, forced=(end + len(ff.END),) if end >= 0 else ())
    assert check_stream_equals_whole(vllm_cls, text, [("drawn", deltas)], tools=TOOLS) == []
