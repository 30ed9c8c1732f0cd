"""``renderer=vllm:MODEL_DIR``: vLLM's own render path in two releases, opt-in (``-m engines``: each
venv is about 2.2 GB; ``tests/engines.py``'s ``vllm-render==0.11.0`` and ``vllm-render==0.33.0``).

0.33.0 renders through ``OnlineRenderer.render_chat``, 0.11.0 through its chat endpoint's
``OpenAIServingChat._preprocess_chat`` (``parse_chat_messages`` and ``apply_hf_chat_template``):
one adapter, told apart by what the release has (``replay/adapters/vllm_render.py``). The same
model folder and corpus as ``tests/test_framework_render_sglang.py``:

- conformance: replay's ``vllm`` preparer (the mirror, with ``model-dump``, rendered in this
  process) against each release, prompt by prompt; the differences are in docs/sides.md;
- the change between the releases, caught by the same conformance check on requests where they
  differ (:func:`release_change_capture`);
- the seed audit: old = 0.11.0, new = 0.33.0 on the agent traffic of the SGLang seed audit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engines import EngineBuildError, engine_python
from test_framework_render_sglang import ROOT, agent_capture, audit, diverging, model_dir  # noqa: F401  (model_dir: a fixture)

pytestmark = pytest.mark.engines

RELEASES = ("0.11.0", "0.33.0")
#: Of the corpus's 46 Chat Completions requests, the 41 with tools differ; the 5 without do not.
VLLM_TOOLED = 41
TEMPLATE = ROOT / "samples" / "templates" / "agent-old.jinja"


@pytest.fixture(scope="module")
def vllm_pythons() -> dict[str, Path]:
    try:
        return {release: engine_python(f"vllm-render=={release}") for release in RELEASES}
    except EngineBuildError as exc:
        pytest.skip(f"cannot build the vLLM render venvs here: {exc}")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return [ROOT / "samples", agent_capture(tmp_path_factory.mktemp("agent") / "agent.jsonl")]


def side(python: Path, model: Path) -> str:
    return f"python={python},render_in=python,renderer=vllm:{model}"


def release_change_capture(path: Path) -> Path:
    """Write a v1 capture of 5 requests, 3 on which vLLM 0.11.0 and 0.33.0 prepare differently: an
    agent turn whose tool-call ``arguments`` were cut off (``{"path": "a``, no tools declared); a
    tool whose ``function`` carries a key the request model does not declare (``x-origin``); a tool
    with ``defer_loading: true``; and 2 controls both releases render alike: ``arguments: ""`` (a
    call without arguments: ``{}`` in both) and a plain tool with its description."""
    read = {"name": "read", "description": "Read a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}

    def turn(arguments: str) -> list[dict]:
        return [{"role": "user", "content": "look at a"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": arguments}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "contents of a"}]

    bodies = {
        "args-empty": {"messages": turn("")},
        "args-cut": {"messages": turn('{"path": "a')},
        "fn-extra-key": {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {**read, "x-origin": "mcp"}}]},
        "defer-loading": {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": read, "defer_loading": True}]},
        "plain-tool": {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": read}]},
    }
    lines = [json.dumps({"id": k, "route": "chat.completions", "model": "m", "request": {"model": "m", **b}}) for k, b in bodies.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("release", RELEASES)
def test_vllm_mirror_conforms_to_release(release, vllm_pythons, model_dir, corpus, tmp_path):  # noqa: F811
    """Every request without tools renders as the release renders it; every one with tools differs
    by the tool dump alone (neither release's ``tool.model_dump()`` writes an unset ``strict``:
    0.11.0's ``FunctionDefinition`` has no such field, 0.33.0's drops it when None; ``model-dump``
    writes ``"strict": null``); Anthropic Messages and Responses requests are not driven."""
    mirror = f"preparer=vllm,serializer=model-dump,chat_template={TEMPLATE}"
    rows, out = audit(tmp_path / "run", corpus, mirror, side(vllm_pythons[release], model_dir), "--tokenizer", str(model_dir / "tokenizer.json"))
    with_tools, without, errors = diverging(rows)
    assert without == []
    assert len(with_tools) == VLLM_TOOLED
    assert sorted(x.rsplit("/", 1)[-1] for x in errors) == ["gateway.har:3", "msg_s1", "resp_s1"]
    assert {rows[(x, "new")]["renderer"] for x, s in rows if s == "new" and not rows[(x, "new")].get("error")} == {f"vllm-{release}"}
    assert f"41 of 46 prompts differ between `model-dump` and `vllm-{release}`" in out


def test_conformance_catches_the_release_change(vllm_pythons, model_dir, tmp_path):  # noqa: F811
    """The same conformance check (replay's ``vllm`` preparer, here with ``as-sent`` tools, against
    the release's own path) on :func:`release_change_capture` tells the releases apart: 0.11.0
    rejects non-empty tool-call arguments that are not JSON (its ``_postprocess_messages``
    ``json.loads`` them; the endpoint's 400) where 0.33.0 and the mirror render ``{}``; 0.11.0 dumps a function key its request model does
    not declare (pydantic ``extra="allow"``) as the client sent it, 0.33.0 drops it; 0.33.0 copies
    a tool's ``defer_loading`` into its function, which the template writes."""
    cap = release_change_capture(tmp_path / "change.jsonl")
    mirror = f"preparer=vllm,serializer=as-sent,chat_template={TEMPLATE}"
    got = {}
    for release in RELEASES:
        rows, _ = audit(tmp_path / release, [cap], mirror, side(vllm_pythons[release], model_dir), "--tokenizer", str(model_dir / "tokenizer.json"))
        with_tools, without, errors = diverging(rows)
        got[release] = (with_tools, without, sorted(errors))
        if release == "0.11.0":
            assert errors["args-cut"].startswith("rejected by vllm-0.11.0: Unterminated string starting at"), errors
    assert got["0.11.0"] == ([], [], ["args-cut"])
    assert got["0.33.0"] == (["defer-loading", "fn-extra-key"], [], [])


def test_seed_audit_two_vllm_releases(vllm_pythons, model_dir, corpus, tmp_path):  # noqa: F811
    """old = vLLM 0.11.0, new = 0.33.0, both through their own render path, on the agent traffic
    and samples of the SGLang seed audit: the prompts that diverge, the leaked nulls that reach the
    prompt and the token cost, as docs/sides.md gives them."""
    rows, out = audit(tmp_path / "run", corpus, side(vllm_pythons["0.11.0"], model_dir), side(vllm_pythons["0.33.0"], model_dir))
    with_tools, without, errors = diverging(rows)
    assert (with_tools, without) == ([], [])
    for name, release in (("old", "0.11.0"), ("new", "0.33.0")):
        got = [rows[(x, name)] for x, s in rows if s == name and not rows[(x, name)].get("error")]
        assert len(got) == 46
        assert {r["renderer"] for r in got} == {f"vllm-{release}"}
        assert sum(r["schemas_with_leaked_null"] for r in got) == 15
        assert sum(bool(r.get("leak_in_prompt")) for r in got) == 15  # description: null (the template writes tool.function)
        assert {p["path"] for r in got for p in r.get("leaked_nulls") or ()} == {"$.function.description", "$.function.parameters"}
    assert sum(rows[(x, "old")]["prompt_tokens"] - rows[(x, "new")]["prompt_tokens"] for x, s in rows if s == "old" and not rows[(x, "old")].get("error")) == 0
    assert "0 of 46 prompts differ between `vllm-0.11.0` and `vllm-0.33.0`" in out
    assert "15 of 147 tool schemas carried a null the client never sent with `vllm-0.11.0`; 15 with `vllm-0.33.0`." in out


def test_render_venv_takes_the_transformers_its_release_loads(vllm_pythons):
    """``vllm-render==X``'s plan pins ``transformers<5`` for 0.11.0 (whose ``get_cached_tokenizer``
    reads ``all_special_tokens_extended``, gone in transformers 5) and leaves 0.33.0 unpinned; the
    built 0.11.0 venv holds a transformers 4 and loads the model folder's tokenizer through vLLM."""
    import subprocess

    import engines

    assert engines._vllm_transformers(vllm_pythons["0.11.0"]) == "transformers<5"
    assert engines._vllm_transformers(vllm_pythons["0.33.0"]) == "transformers"
    assert engines._vllm_transformers in engines._install_plan("vllm-render==0.11.0")[0][-2]
    got = subprocess.run([str(vllm_pythons["0.11.0"]), "-c", "import transformers; print(transformers.__version__.split('.')[0])"],
                         capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "4"


def test_release_it_cannot_drive_is_one_line(model_dir, tmp_path):  # noqa: F811
    """A vllm with neither ``vllm.renderers.online_renderer`` nor
    ``vllm.entrypoints.openai.serving_chat``: one line naming the release and both missing paths,
    before any work (exit 1). Runs in this interpreter with a stand-in ``vllm`` package."""
    import subprocess
    import sys

    fake = tmp_path / "fake"
    (fake / "vllm").mkdir(parents=True)
    (fake / "vllm" / "__init__.py").write_text("")
    replay = Path(sys.executable).parent / "replay"
    cmd = [str(replay), "audit", str(ROOT / "samples" / "coding-agent.jsonl"), "--out", str(tmp_path / "run"), "--jobs", "1",
           "--old", f"python={sys.executable},pythonpath={fake},render_in=python,renderer=vllm:{model_dir}"]
    got = subprocess.run(cmd, capture_output=True, text=True)
    assert got.returncode == 1, got.stdout + got.stderr
    lines = [line for line in (got.stdout + got.stderr).splitlines() if "cannot drive" in line]
    assert len(lines) == 1, got.stdout + got.stderr
    assert "neither vllm.renderers.online_renderer (OnlineRenderer.render_chat) nor vllm.entrypoints.openai.serving_chat" in lines[0]
