"""Per-side rendering end to end on samples/: a template-change audit, a preparation-change audit,
leaks judged on the prompt, not-judged exchanges and per-model template routes (exact counts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from strategies import SHARED

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
OLD_T = str(SAMPLES / "templates" / "agent-old.jinja")
NEW_T = str(SAMPLES / "templates" / "agent-new.jinja")
runner = CliRunner()


def audit(tmp_path: Path, *args: str, name: str = "run") -> Path:
    out = tmp_path / name
    result = runner.invoke(app, ["audit", str(SAMPLES), "--out", str(out), "--quiet", *args])
    assert result.exit_code == 0, result.output
    return out


def query(run: Path, name: str | None = None, sql: str | None = None) -> list[dict]:
    args = ["query", name] if name else ["query", "--sql", sql]
    result = runner.invoke(app, [*args, "--run", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def verdicts(run: Path) -> dict[str, dict]:
    return {r["check"]: {k: v for k, v in r.items() if k != "check"} for r in query(run, "verdicts")}


def summary(run: Path) -> dict[str, dict]:
    return {r["side"]: r for r in query(run, "summary")}


def row(fixed=0, broken=0, same_ok=0, still=0, changed=0, exchanges=37, not_judged=0, improved=0) -> dict:
    return {"fixed": fixed, "improved": improved, "broken": broken, "same-ok": same_ok, "still-wrong": still, "changed-wrong": changed,
            "unreliable": 0, "wrong": None, "exchanges": exchanges, "not-judged": not_judged}


def test_template_change_audit(tmp_path):
    """Old and new are two versions of one template: the old writes each tool whole (a
    serializer's `strict: null` reaches the prompt), the new writes name/description/parameters
    when set. Same serializer (model-dump) on both sides: the template change alone fixes the leak."""
    run = audit(tmp_path, "--old-chat-template", OLD_T, "--new-chat-template", NEW_T, "--chat-template", NEW_T,
                "--old-serializer", "model-dump", "--new-serializer", "model-dump")
    v = verdicts(run)
    assert v["null-leak"] == row(fixed=35, same_ok=2)
    assert v["prompt-divergence"] == row(fixed=35, same_ok=2)
    assert v["render-failure"] == row(same_ok=37)
    s = summary(run)
    assert (s["old"]["schemas_with_leaked_null"], s["old"]["prompts_with_leaked_null"], s["old"]["prompts_diverged_from_reference"]) == (54, 35, 35)
    assert (s["new"]["schemas_with_leaked_null"], s["new"]["prompts_with_leaked_null"], s["new"]["prompts_diverged_from_reference"]) == (54, 0, 0)
    renderers = query(run, sql="SELECT side, renderer, count(*) AS n FROM renders WHERE side IN ('old', 'new') GROUP BY ALL ORDER BY side")
    assert renderers == [{"side": "new", "renderer": "chat-template:agent-new.jinja", "n": 37}, {"side": "old", "renderer": "chat-template:agent-old.jinja", "n": 37}]


def test_preparation_change_audit(tmp_path):
    """Old renders the client's JSON as sent, new prepares it as vLLM does: the 6 coding-agent
    requests with tool-call history fail on the old side (string arguments through `| items`)."""
    run = audit(tmp_path, "--chat-template", NEW_T, "--old-preparer", "as-sent", "--new-preparer", "vllm",
                "--old-serializer", "client-fields", "--new-serializer", "client-fields")
    v = verdicts(run)
    assert v["render-failure"] == row(fixed=6, same_ok=31)
    # the 6 have no old prompt: null-leak and prompt-divergence cannot judge them, and say so (each
    # exchange in exactly one column; a row sums to `exchanges`)
    assert v["null-leak"] == row(same_ok=31, not_judged=6)
    assert v["prompt-divergence"] == row(same_ok=31, not_judged=6)
    for check, r in v.items():
        if not check.startswith("served:"):
            assert sum(r[c] for c in ("fixed", "improved", "broken", "same-ok", "still-wrong", "changed-wrong", "unreliable", "not-judged")) == r["exchanges"], check
    not_judged = [r for r in query(run, "verdict_exchanges") if r["verdict"] == "not-judged"]
    assert sorted((r["check"], r["exchange_id"]) for r in not_judged) == sorted(
        (c, f"agent-0{i}") for c in ("null-leak", "prompt-divergence") for i in range(2, 8))
    assert {r["reason"] for r in not_judged} == {"old failed to render: TypeError: Can only get item pairs from a mapping."}
    assert query(run, "render_failures") == [
        {"side": "old", "reason": "TypeError: Can only get item pairs from a mapping.", "exchanges": 6, "example": "agent-02", "of_side": 6}
    ]
    s = summary(run)
    # client-fields leaves get_time's parameters null (5 schemas); the template skips a null parameters
    assert (s["new"]["schemas_with_leaked_null"], s["new"]["prompts_with_leaked_null"]) == (5, 0)
    assert query(run, sql="SELECT DISTINCT side, preparer FROM renders WHERE side <> 'served' ORDER BY side") == [
        {"side": "new", "preparer": "vllm"}, {"side": "old", "preparer": "as-sent"}, {"side": "reference", "preparer": "vllm"}]
    report = (run / "report.md").read_text()
    assert "Top render-failure reasons, old: `TypeError: Can only get item pairs from a mapping.` (6, e.g. `agent-02`)." in report
    assert ("6 exchanges not judged on null-leak and prompt-divergence: a side could not render them, so it has no prompt to judge "
            "(`not-judged` in the verdict table; render-failure judges them).") in report
    assert "not judged on the render checks" not in report  # the reference rendered them all


def test_a_template_that_renders_no_tools_carries_no_leak(tmp_path):
    tmpl = tmp_path / "no-tools.jinja"
    tmpl.write_text("{% for m in messages %}<{{ m.role }}>{{ m.content or '' }}\n{% endfor %}<assistant>")
    run = audit(tmp_path, "--chat-template", str(tmpl))
    s = summary(run)
    assert (s["old"]["schemas_with_leaked_null"], s["old"]["prompts_with_leaked_null"]) == (54, 0)
    assert (s["new"]["schemas_with_leaked_null"], s["new"]["prompts_with_leaked_null"]) == (5, 0)
    assert verdicts(run)["null-leak"] == row(same_ok=37)
    assert verdicts(run)["prompt-divergence"] == row(same_ok=37)


def test_deepseek_v31_llama_cpp_template_leaks_nothing_into_the_prompt(tmp_path):
    path = SHARED / "corpus" / "chat_templates" / "llama.cpp" / "deepseek-ai-DeepSeek-V3.1.jinja"
    if not path.is_file():
        pytest.skip(f"no {path}")
    s = summary(audit(tmp_path, "--chat-template", str(path)))
    assert s["old"]["schemas_with_leaked_null"] == 54 and s["old"]["prompts_with_leaked_null"] == 0


def test_reference_that_cannot_render_is_not_judged(tmp_path):
    run = audit(tmp_path, "--chat-template", NEW_T, "--reference-preparer", "as-sent")
    v = verdicts(run)
    for check in ("null-leak", "prompt-divergence", "render-failure"):
        assert v[check]["not-judged"] == 6 and v[check]["same-ok"] == 31 and v[check]["exchanges"] == 37, check
    assert v["dropped-call"]["not-judged"] == 0
    rows = [r for r in query(run, "verdict_exchanges") if r["verdict"] == "not-judged"]
    assert len(rows) == 18
    assert {r["reason"] for r in rows} == {"reference failed to render: TypeError: Can only get item pairs from a mapping."}
    assert sorted({r["exchange_id"] for r in rows}) == [f"agent-0{i}" for i in range(2, 8)]
    report = (run / "report.md").read_text()
    assert "6 exchanges not judged on the render checks" in report
    result = runner.invoke(app, ["report", "--run", str(run), "--fail-on", "render-failure:not-judged>5"])
    assert result.exit_code == 3 and "render-failure has 6 not-judged exchanges" in result.output


def test_per_model_templates(tmp_path):
    run = audit(tmp_path, "--chat-template", f"Qwen/*={NEW_T}", "--chat-template", f"*gpt-oss*={OLD_T}")
    got = query(run, sql="SELECT renderer, count(*) AS n FROM renders WHERE side = 'old' GROUP BY ALL ORDER BY renderer")
    assert got == [{"renderer": "chat-template:agent-new.jinja", "n": 13}, {"renderer": "chat-template:agent-old.jinja", "n": 1},
                   {"renderer": "json-tools", "n": 23}]
    assert f"Per-model templates: `Qwen/*` -> `{NEW_T}` 13, `*gpt-oss*` -> `{OLD_T}` 1; 23 exchanges matched no pattern, rendered with `json-tools`." in (run / "report.md").read_text()
    meta = json.loads((run / "run.json").read_text())
    assert meta["options"]["chat_template_routes"] == [f"Qwen/*={NEW_T}", f"*gpt-oss*={OLD_T}"]


@pytest.mark.parametrize("args,message", [
    (["--old", "chat_template=x.jinja,renderer=harmony"], "--old: chat_template and renderer both name"),  # exit 2: a side value's usage error
    (["--old-chat-template", "x.jinja", "--old-renderer", "harmony"], "--old: chat_template and renderer both name"),
    (["--chat-template", "a.jinja", "--chat-template", "b.jinja"], "a second plain --chat-template"),
    (["--new-preparer", "tgi"], "unknown preparer 'tgi'"),  # exit 2: test_unknown_names_are_usage_errors
    (["--tokenizer", "Qwen/*=tok.json"], "no --chat-template with that pattern"),
])
def test_bad_render_options_fail_naming_the_option(tmp_path, args, message):
    result = runner.invoke(app, ["audit", str(SAMPLES), "--out", str(tmp_path / "r"), "--quiet", *args])
    assert result.exit_code == (2 if "unknown" in message or "both name" in message else 1) and message in " ".join(result.output.split()), result.output


def test_an_out_of_process_side_serializes_what_its_preparer_made(tmp_path):
    """vLLM's Anthropic converter writes a missing tool description as None: a side serialized in
    a worker (--old-python) sees the converted tools, as the in-process side does."""
    import sys

    cap = tmp_path / "messages.jsonl"
    request = {"model": "claude-x", "max_tokens": 10, "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
               "messages": [{"role": "user", "content": "Paris?"}]}
    cap.write_text(json.dumps({"id": "m1", "route": "messages", "request": request}) + "\n")
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", str(cap), "--out", str(out), "--quiet", "--old-python", sys.executable,
                                 "--old-serializer", "as-sent", "--new-serializer", "as-sent"])
    assert result.exit_code == 0, result.output
    got = query(out, sql="SELECT side, leaked_nulls FROM renders WHERE side IN ('old', 'new') ORDER BY side")
    assert got == [{"side": "new", "leaked_nulls": [{"tool_index": 0, "path": "$.function.description"}]},
                   {"side": "old", "leaked_nulls": [{"tool_index": 0, "path": "$.function.description"}]}]
