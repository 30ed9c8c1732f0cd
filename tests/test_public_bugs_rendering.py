"""Rendering cases of ../shared/cases/public-bugs.jsonl (those without ``input.parser``: B27, B28,
B29, B33, B55, B57): the fixed side gives ``expected``, and an audit whose old side replays the
faulty behaviour the report describes flags it under the matching check (``fixed`` on that check,
the new side being the fix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strategies import SHARED

from typer.testing import CliRunner

from replay.cli import app
from replay.prepare import get_preparer
from replay.render import JsonToolsRenderer
from replay.render.options import template_renderer
from replay.tools import get_serializer, leaked_nulls

TEMPLATES = SHARED / "corpus" / "chat_templates" / "llama.cpp"
runner = CliRunner()

CASES = SHARED / "cases" / "public-bugs.jsonl"


def case(case_id: str) -> dict:
    if not CASES.is_file():
        pytest.skip(f"no {CASES}")
    for line in CASES.read_text(encoding="utf-8").splitlines():
        c = json.loads(line)
        if c["id"] == case_id:
            return c
    pytest.skip(f"no case {case_id}")


def test_b33_tool_without_parameters_or_with_nulls():
    """ollama-python#733 / a vLLM 0.19 deployment rejecting null description: a tool with no
    parameters (and one with explicit nulls) must serialize and render without writing nulls."""
    c = case("B33")
    tools = c["input"]["tools"]
    not_contains = c["expected"]["serialized_not_contains"]
    fixed = [get_serializer("exclude-none")(t) for t in tools]
    rendered = JsonToolsRenderer().render([], fixed)
    assert all(s not in rendered for s in not_contains)
    # the faulty serializers write the nulls; for the tool the client sent without them that is a leak
    leaks = {}
    for name in ("model-dump", "client-fields"):
        ser = get_serializer(name)
        out = [ser(t) for t in tools]
        assert any(s in JsonToolsRenderer().render([], out) for s in not_contains), name
        leaks[name] = [leaked_nulls(t, o) for t, o in zip(tools, out)]
    # f was sent without nulls: every null written for it is a leak; g wrote description and
    # parameters null itself, so only the strict that model-dump adds is one
    assert leaks["model-dump"] == [
        ["$.function.description", "$.function.parameters", "$.function.strict"],
        ["$.function.strict"],
    ]
    assert leaks["client-fields"] == [["$.function.parameters"], []]


RENDER_CASES = ("B27", "B28", "B29", "B33", "B55", "B57")


def test_the_rendering_cases_are_these():
    if not CASES.is_file():
        pytest.skip(f"no {CASES}")
    ids = [json.loads(line)["id"] for line in CASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    rendering = [i for i in ids if "parser" not in json.loads(next(l for l in CASES.read_text().splitlines() if f'"id": "{i}"' in l))["input"]]
    assert tuple(rendering) == RENDER_CASES


def audit_case(tmp_path: Path, request: dict, *args: str, route: str = "chat.completions", model: str = "m") -> dict[str, dict]:
    """Audit a one-exchange capture of ``request``; returns the render checks' verdict rows."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    cap = tmp_path / "case.jsonl"
    cap.write_text(json.dumps({"id": "case", "route": route, "model": model, "request": request}) + "\n")
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", str(cap), "--out", str(out), "--quiet", *args])
    assert result.exit_code == 0, result.output
    got = runner.invoke(app, ["query", "verdicts", "--run", str(out), "--format", "json"])
    return {r["check"]: r for r in json.loads(got.output) if r["check"] in ("null-leak", "prompt-divergence", "render-failure")}


def verdict(rows: dict[str, dict], check: str) -> str:
    """The one exchange's verdict on ``check``."""
    r = rows[check]
    hits = [v for v in ("fixed", "broken", "same-ok", "still-wrong", "changed-wrong", "not-judged") if r[v]]
    assert len(hits) == 1, r
    return hits[0]


def template(name: str) -> Path:
    path = TEMPLATES / name
    if not path.is_file():
        pytest.skip(f"no {path}")
    return path


def test_b27_strict_printed_by_the_qwen3_template(tmp_path):
    """vllm#52741: `strict: false` reaches the Qwen3 prompt. Old: model-dump (what vLLM hands the
    template); new and reference: request-fields (name, description, parameters)."""
    c = case("B27")
    tmpl = template("Qwen-Qwen3-0.6B.jinja")
    request = {"messages": c["input"]["messages"], "tools": c["input"]["tools"]}
    r = template_renderer(tmpl, None, None)
    fixed = r.render(request["messages"], [get_serializer("request-fields")(t) for t in request["tools"]])
    faulty = r.render(request["messages"], [get_serializer("model-dump")(t) for t in request["tools"]])
    without = [{**t, "function": {k: v for k, v in t["function"].items() if k != "strict"}} for t in request["tools"]]
    assert fixed == r.render(request["messages"], without)  # rendered_equals_render_of: the tools without strict
    assert all(s not in fixed for s in c["expected"]["rendered_not_contains"])
    assert all(s in faulty for s in c["expected"]["rendered_not_contains"])
    rows = audit_case(tmp_path, request, "--chat-template", str(tmpl), "--old-serializer", "model-dump",
                      "--new-serializer", "request-fields", "--reference-serializer", "request-fields")
    assert verdict(rows, "prompt-divergence") == "fixed"
    assert verdict(rows, "null-leak") == "same-ok"  # `strict: false` is no null: the fault is the divergence


def test_b28_harmony_tool_without_description(tmp_path):
    """vllm PR#44686: a tool declared without description fails Harmony's ToolDescription.
    Old: model-dump (description None); new: empty-description."""
    c = case("B28")
    from replay.render.harmony import HarmonyRenderer

    h = HarmonyRenderer()
    for tools in (c["input"]["tools"], c["input"]["variant_tools"]):
        text = h.render(c["input"]["messages"], [get_serializer("empty-description")(t) for t in tools])
        assert all(s in text for s in c["expected"]["rendered_contains"])
        assert all(s not in text for s in c["expected"]["rendered_not_contains"])
        request = {"messages": c["input"]["messages"], "tools": tools}
        rows = audit_case(tmp_path / str(len(tools[0]["function"])), request, "--renderer", "harmony", "--reference-encoder", "harmony",
                          "--old-serializer", "model-dump", "--new-serializer", "empty-description", "--reference-serializer", "empty-description")
        assert verdict(rows, "render-failure") == "fixed"


def test_b29_qwen35_string_arguments(tmp_path):
    """llama.cpp#19905 / Qwen3#1894: the Qwen3.5 template iterates a tool call's arguments as a
    mapping. Old: the client's JSON-string arguments as sent; new: vLLM's preparation parses them."""
    c = case("B29")
    tmpl = template("Qwen3.5-4B.jinja")
    request = {"messages": c["input"]["messages"], "tools": c["input"]["tools"]}
    r = template_renderer(tmpl, None, None)
    prep = get_preparer("vllm").prepare("chat.completions", request, "string")
    text = r.render(prep.messages, prep.tools)
    assert all(s in text for s in c["expected"]["rendered_contains"])
    assert all(s not in text for s in c["expected"]["rendered_not_contains"])
    rows = audit_case(tmp_path, request, "--chat-template", str(tmpl), "--old-preparer", "as-sent", "--new-preparer", "vllm")
    assert verdict(rows, "render-failure") == "fixed"


def test_b33_replayed_through_the_audit(tmp_path):
    c = case("B33")
    request = {"messages": [{"role": "user", "content": "placeholder"}], "tools": c["input"]["tools"]}
    rows = audit_case(tmp_path, request, "--old-serializer", "model-dump", "--new-serializer", "exclude-none")
    assert verdict(rows, "null-leak") == "fixed" and verdict(rows, "render-failure") == "same-ok"


SGLANG_OLD_ORDER = """
def description_first(tool):
    # the field order of SGLang's Function model before PR#39616: description, name, parameters
    fn = tool["function"]
    out = {k: fn[k] for k in ("description", "name", "parameters") if k in fn}
    return {"type": "function", "function": out}
"""


def test_b55_tool_field_order(tmp_path):
    """sglang PR#39616: the protocol model wrote `description` before `name`, so a `tojson`
    template's prompt bytes differ from the client's tool dicts. Old: that order (a plugin
    serializer); new and reference: the client's dicts as received."""
    c = case("B55")
    tmpl = tmp_path / "fragment.jinja"
    tmpl.write_text(c["input"]["template_fragment"])
    plugin = tmp_path / "sglang_order.py"
    plugin.write_text(SGLANG_OLD_ORDER)
    request = {"messages": c["input"]["messages"], "tools": c["input"]["tools"]}
    r = template_renderer(tmpl, None, None)
    fixed = r.render(request["messages"], request["tools"])
    faulty = r.render(request["messages"], [get_serializer(f"{plugin}:description_first")(t) for t in request["tools"]])
    assert all(s in fixed for s in c["expected"]["rendered_contains"]) and all(s not in fixed for s in c["expected"]["rendered_not_contains"])
    assert all(s in faulty for s in c["expected"]["rendered_not_contains"])
    rows = audit_case(tmp_path, request, "--chat-template", str(tmpl), "--old-serializer", f"{plugin}:description_first", "--new-serializer", "as-sent")
    assert verdict(rows, "prompt-divergence") == "fixed"


NULL_DESCRIPTION_CONVERTER = """
def convert(route, request):
    # a Responses -> Chat Completions converter that always writes description (null when missing)
    messages = [{"role": "user", "content": request["input"]}]
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description"), "parameters": t.get("parameters")}}
             for t in request.get("tools", [])]
    return messages, tools
"""


def test_b57_responses_converter_writes_a_null_description(tmp_path):
    """cc-switch PR#7378: the proxy's Responses -> Chat converter emitted `description: null`.
    Old: such a converter (a plugin preparer); new: vLLM's conversion, which keeps the client's keys."""
    c = case("B57")
    request = {"input": "placeholder", "tools": c["input"]["responses_tools"]}
    got = get_preparer("vllm").prepare("responses", request, "string")
    assert got.tools == c["expected"]["converted_tools"]
    dumped = JsonToolsRenderer().render([], [get_serializer("as-sent")(t) for t in got.tools])
    assert all(s not in dumped for s in c["expected"]["serialized_not_contains"])
    plugin = tmp_path / "proxy.py"
    plugin.write_text(NULL_DESCRIPTION_CONVERTER)
    rows = audit_case(tmp_path, request, "--old-preparer", f"{plugin}:convert", "--new-preparer", "vllm",
                      "--old-serializer", "as-sent", "--new-serializer", "as-sent", route="responses")
    assert verdict(rows, "null-leak") == "fixed"
