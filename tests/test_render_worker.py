"""A side rendered in its own interpreter (``--old-python PY --old-render-in python``).

- With the audit's own interpreter as the side's, every ``renders`` row is the in-process row
  (failures, leaked nulls, leaks judged on the prompt, token counts with a tokenizer included).
- With a venv holding another transformers (4.57.6; the audit runs 5.24 here), a template behaviour
  that differs between the two is rendered by the side's own version: transformers 5 copies an
  assistant message's reasoning to ``thinking`` (``_alias_reasoning_fields`` in
  ``transformers/utils/chat_template_utils.py``, for the gpt-oss templates, which read
  ``message.thinking``); 4.57.6 does not. The venv is built on first use and cached
  (tests/engines.py, ``transformers==4.57.6``, about 25 s); the test skips when it cannot be built.
- A crash and a hang in the worker while rendering cost that exchange's row only, as for parsing.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from agent_traffic import agent_requests
from engines import EngineBuildError, engine_python
from sides_data import ROOT, invoke, query_json

PY = sys.executable
SAMPLES = ROOT / "samples"
NEW_T = SAMPLES / "templates" / "agent-new.jinja"
OLD_T = SAMPLES / "templates" / "agent-old.jinja"  # writes each tool whole: a leaked null reaches the prompt
OLD_TRANSFORMERS = "transformers==4.57.6"

#: A template that reads an assistant turn's ``thinking``, as the gpt-oss templates do.
THINKING_T = (
    "{%- for m in messages %}<|{{ m.role }}|>"
    "{%- if m.role == 'assistant' and m.thinking %}<|think|>{{ m.thinking }}<|/think|>{% endif %}"
    "{%- if m.content %}{{ m.content }}{% endif %}"
    "{%- for c in m.tool_calls or [] %}<|call|>{{ c.function.name }}{{ c.function.arguments | tojson }}{% endfor %}<|end|>\n"
    "{% endfor %}{%- if tools %}<|tools|>{{ tools | tojson }}\n{% endif %}<|assistant|>"
)

COLUMNS = ("exchange_id, side, renderer, serializer, preparer, n_tools, leaked_nulls, schemas_with_leaked_null, prompt_sha256, "
           "prompt_chars, prompt_tokens, prompt_ids_sha256, tokens_differing, leak_in_prompt, error")


def _tokenizer(path: Path) -> Path:
    """A whitespace word-level tokenizer.json written for these tests (every word one token)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tok = Tokenizer(WordLevel({"[UNK]": 0, "read": 1, "path": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(path))
    return path


def _audit(out: Path, capture: Path, *args: str) -> Path:
    result = invoke("audit", capture, "--out", out, "-q", *args)
    assert result.exit_code == 0, result.output
    return out


def _renders(run: Path) -> list[dict]:
    return query_json(run, f"SELECT {COLUMNS} FROM renders ORDER BY exchange_id, side")


def _verdict(run: Path, check: str) -> dict:
    rows = {r["check"]: r for r in json.loads(invoke("query", "verdicts", "--run", run, "--format", "json").output)}
    return {k: v for k, v in rows[check].items() if k in ("fixed", "broken", "same-ok", "changed-wrong", "exchanges", "not-judged")}


def test_in_the_worker_every_row_is_the_in_process_row(tmp_path: Path) -> None:
    """Same interpreter, both sides rendered by their workers: the renders table is identical to
    the in-process run's, with the old side's 6 preparer failures, model-dump's leaks reaching the
    prompt, token counts and the served rows (36 exchanges: the word-level tokenizer cannot encode
    the token ids of the server-log sample, an ingest error); run.json says where each side
    rendered and with which packages."""
    tok = _tokenizer(tmp_path / "tokenizer.json")
    common = ("--chat-template", str(OLD_T), "--tokenizer", str(tok), "--old-preparer", "as-sent")
    here = _audit(tmp_path / "here", SAMPLES, *common)
    there = _audit(tmp_path / "there", SAMPLES, *common, "--old-python", PY, "--old-render-in", "python",
                   "--new-python", PY, "--new-render-in", "python")
    rows = _renders(here)
    assert _renders(there) == rows
    old = [r for r in rows if r["side"] == "old"]
    assert (len(old), sum(r["error"] is not None for r in old), sum(bool(r["leak_in_prompt"]) for r in old)) == (36, 6, 29)
    assert sum(r["side"] == "served" for r in rows) == 2
    assert all(r["prompt_tokens"] > 0 for r in rows if r["error"] is None)
    meta = json.loads((there / "run.json").read_text())
    import jinja2
    import transformers

    for side in ("old", "new"):
        assert meta["sides"][side]["render_in"] == "python"
        assert meta["sides"][side]["render"] == {"renderer": "chat-template:agent-old.jinja", "transformers": transformers.__version__,
                                                 "jinja2": jinja2.__version__, "tokenizers": meta["sides"][side]["render"]["tokenizers"]}
        assert meta["sides"][side]["restarts"] == 0
    assert meta["options"]["old_render_in"] == "python"
    assert json.loads((here / "run.json").read_text())["options"]["old_render_in"] == "audit"


def _reasoning_capture(path: Path, n: int = 12) -> tuple[Path, int]:
    """Agent traffic (tests/agent_traffic.py) in which every other request carries the model's
    reasoning on its first assistant tool-call turn, as clients send it back (``reasoning``).
    Returns the capture and how many requests carry reasoning."""
    lines, with_reasoning = [], 0
    for i, req in enumerate(agent_requests(n, seed=11)):
        req = copy.deepcopy(req)
        turn = next((m for m in req["messages"] if m["role"] == "assistant" and m.get("tool_calls")), None)
        if i % 2 == 0 and turn is not None:
            turn["reasoning"] = f"Step {i}: look at the file first."
            with_reasoning += 1
        lines.append({"id": f"r{i:02d}", "route": "chat.completions", "model": "openai/gpt-oss-20b", "request": req})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path, with_reasoning


@pytest.fixture(scope="module")
def old_transformers() -> Path:
    try:
        return engine_python(OLD_TRANSFORMERS)
    except EngineBuildError as exc:
        pytest.skip(f"cannot build a {OLD_TRANSFORMERS} venv here: {exc}")


def test_a_side_renders_with_its_own_transformers(tmp_path: Path, old_transformers: Path) -> None:
    capture, n_reasoning = _reasoning_capture(tmp_path / "agents.jsonl")
    assert n_reasoning == 6
    tmpl = tmp_path / "thinking.jinja"
    tmpl.write_text(THINKING_T, encoding="utf-8")
    same = ("--chat-template", str(tmpl), "--old-serializer", "client-fields", "--new-serializer", "client-fields", "--reference-serializer", "client-fields")
    # old in the 4.57.6 venv, rendering there: its prompts lack the reasoning where the request has it
    run = _audit(tmp_path / "old-there", capture, *same, "--old-python", str(old_transformers), "--old-render-in", "python")
    assert _verdict(run, "prompt-divergence") == {"fixed": 6, "broken": 0, "same-ok": 6, "changed-wrong": 0, "exchanges": 12, "not-judged": 0}
    assert _verdict(run, "null-leak") == {"fixed": 0, "broken": 0, "same-ok": 12, "changed-wrong": 0, "exchanges": 12, "not-judged": 0}
    old = {r["exchange_id"]: r for r in query_json(run, "SELECT exchange_id, prompt_sha256, prompt_chars FROM renders WHERE side = 'old'")}
    ref = {r["exchange_id"]: r for r in query_json(run, "SELECT exchange_id, prompt_sha256, prompt_chars FROM renders WHERE side = 'reference'")}
    differ = sorted(x for x in old if old[x]["prompt_sha256"] != ref[x]["prompt_sha256"])
    assert differ == [f"r{i:02d}" for i in range(0, 12, 2)]
    # each differs by exactly the reasoning block transformers 5 renders from `thinking`
    for x in differ:
        i = int(x[1:])
        assert ref[x]["prompt_chars"] - old[x]["prompt_chars"] == len(f"<|think|>Step {i}: look at the file first.<|/think|>")
    meta = json.loads((run / "run.json").read_text())["sides"]["old"]
    assert (meta["render_in"], meta["render"]["transformers"]) == ("python", "4.57.6")
    # replay show re-renders every side here, and says the old prompt is then not the judged one
    shown = invoke("show", "r00", "--run", run).output
    old_line = next(line for line in shown.splitlines() if line.startswith("old "))
    assert f"sha256 {old['r00']['prompt_sha256'][:12]}  (re-rendered here: sha256 {ref['r00']['prompt_sha256'][:12]}, not the judged prompt)" in old_line
    # the same venv rendering in the audit (the default): only the serializer runs there, the
    # template renders with this interpreter's transformers, and nothing differs
    run = _audit(tmp_path / "old-here", capture, *same, "--old-python", str(old_transformers))
    assert _verdict(run, "prompt-divergence") == {"fixed": 0, "broken": 0, "same-ok": 12, "changed-wrong": 0, "exchanges": 12, "not-judged": 0}
    assert json.loads((run / "run.json").read_text())["sides"]["old"]["render_in"] == "audit"
    # the older transformers as the new side: the upgrade's change reads as broken
    run = _audit(tmp_path / "new-there", capture, *same, "--new-python", str(old_transformers), "--new-render-in", "python")
    assert _verdict(run, "prompt-divergence") == {"fixed": 0, "broken": 6, "same-ok": 6, "changed-wrong": 0, "exchanges": 12, "not-judged": 0}


SERIALIZER = """
import os, signal, time
from replay.tools import get_serializer

_base = get_serializer("client-fields")


def faulty(tool):
    name = tool.get("function", {}).get("name")
    if name == "boom":
        os._exit(3)
    if name == "hang":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(60)
    if name == "slow":
        time.sleep(60)
    return _base(tool)
"""


def test_a_crash_or_a_hang_while_rendering_costs_that_exchanges_row(tmp_path: Path) -> None:
    """x1's tool makes the worker exit, x2's blocks SIGALRM and sleeps (the parent kills the
    worker after replay_timeout + 2 s), x3's sleeps (the worker's own deadline stops it): each of
    those old rows carries its error, the other rows are as in process, restarts are counted."""
    plugin = tmp_path / "faulty_ser.py"
    plugin.write_text(SERIALIZER, encoding="utf-8")
    lines = []
    for i, name in enumerate(["read", "boom", "hang", "slow", "write"]):
        tool = {"type": "function", "function": {"name": name, "description": "A tool.", "parameters": {"type": "object", "properties": {}}}}
        req = {"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": f"task {i}"}], "tools": [tool]}
        lines.append({"id": f"x{i}", "route": "chat.completions", "model": "Qwen/Qwen3-8B", "request": req})
    capture = tmp_path / "c.jsonl"
    capture.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    run = _audit(tmp_path / "run", capture, "--chat-template", str(NEW_T), "--old-serializer", f"{plugin}:faulty",
                 "--old-python", PY, "--old-render-in", "python", "--replay-timeout", "0.5")
    old = {r["exchange_id"]: r for r in query_json(run, "SELECT exchange_id, error, prompt_sha256 FROM renders WHERE side = 'old'")}
    new = {r["exchange_id"]: r for r in query_json(run, "SELECT exchange_id, error, prompt_sha256 FROM renders WHERE side = 'new'")}
    assert old["x1"]["error"].startswith("WorkerError: the worker exited (exit code 3)")
    assert old["x2"]["error"] == "WorkerError: the worker gave no answer in 2.5 s: killed"
    assert old["x3"]["error"] == "ReplayTimeout: took more than 0.5 s"
    for x in ("x0", "x4"):  # client-fields on both sides: the same prompt
        assert old[x]["error"] is None and old[x]["prompt_sha256"] == new[x]["prompt_sha256"]
    assert all(r["error"] is None for r in new.values())
    meta = json.loads((run / "run.json").read_text())["sides"]["old"]
    assert meta["restarts"] == 2
    assert [i["exchange_id"] for i in meta["incidents"]] == ["x1", "x2"]
    assert _verdict(run, "render-failure") == {"fixed": 3, "broken": 0, "same-ok": 2, "changed-wrong": 0, "exchanges": 5, "not-judged": 0}


@pytest.mark.parametrize("args, message", [
    (["--old", "render_in=python"], "--old: render_in=python needs python=INTERPRETER (the side has no interpreter of its own)"),
    (["--old-render-in", "python"], "--old: render_in=python needs python=INTERPRETER"),  # the deprecated flag
    (["--new", "render_in=elsewhere"], "--new: render_in 'elsewhere' is not one of: audit, python"),
])
def test_render_in_python_needs_the_sides_interpreter(tmp_path: Path, args: list[str], message: str) -> None:
    result = invoke("audit", SAMPLES, "--out", tmp_path / "r", "-q", *args)
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output


def test_a_template_the_sides_interpreter_cannot_load_stops_the_run_first(tmp_path: Path) -> None:
    """A side whose interpreter lacks the render packages (a venv of the standard library alone)
    cannot render there: the audit stops before any work, naming both options and the module."""
    import subprocess

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    bare = tmp_path / "bare" / "bin" / "python"
    result = invoke("audit", SAMPLES, "--out", tmp_path / "r", "-q", "--chat-template", NEW_T, "--old-python", bare, "--old-render-in", "python")
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert f"--old-python {bare} --old-render-in python: cannot render here: ModuleNotFoundError: No module named" in text, text
    assert not (tmp_path / "r" / "renders.parquet").exists()
