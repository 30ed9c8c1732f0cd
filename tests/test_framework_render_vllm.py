"""``renderer=vllm:MODEL_DIR``: vLLM's own render path (0.33.0), opt-in (``-m engines``: the venv is
about 2.2 GB; ``tests/engines.py``'s ``vllm-render==0.33.0``).

The same model folder and corpus as ``tests/test_framework_render_sglang.py``: replay's ``vllm``
preparer (the mirror, with ``model-dump``, rendered in this process) against vLLM's
``OnlineRenderer.render_chat``, prompt by prompt; the differences are in docs/sides.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engines import EngineBuildError, engine_python
from test_framework_render_sglang import ROOT, agent_capture, audit, diverging, model_dir  # noqa: F401  (model_dir: a fixture)

pytestmark = pytest.mark.engines

#: Of the corpus's 46 Chat Completions requests, the 41 with tools differ; the 5 without do not.
VLLM_TOOLED = 41
VLLM_HEADLINE = "41 of 46 prompts differ between `model-dump` and `vllm-0.33.0`"


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    try:
        return engine_python("vllm-render==0.33.0")
    except EngineBuildError as exc:
        pytest.skip(f"cannot build the vLLM render venv here: {exc}")


def test_vllm_mirror_conforms_to_release(vllm_python, model_dir, tmp_path):  # noqa: F811
    """Every request without tools renders as vLLM 0.33.0 renders it; every one with tools differs
    by the tool dump alone (vLLM's ``Tool.model_dump()`` has no ``strict`` key, ``model-dump``
    writes ``"strict": null``); Anthropic Messages and Responses requests are not driven."""
    corpus = [ROOT / "samples", agent_capture(tmp_path / "agent.jsonl")]
    template = ROOT / "samples" / "templates" / "agent-old.jinja"
    mirror = f"preparer=vllm,serializer=model-dump,chat_template={template}"
    new = f"python={vllm_python},render_in=python,renderer=vllm:{model_dir}"
    rows, out = audit(tmp_path / "run", corpus, mirror, new, "--tokenizer", str(model_dir / "tokenizer.json"))
    with_tools, without, errors = diverging(rows)
    assert without == []
    assert len(with_tools) == VLLM_TOOLED
    assert sorted(x.rsplit("/", 1)[-1] for x in errors) == ["gateway.har:3", "msg_s1", "resp_s1"]
    assert {rows[(x, "new")]["renderer"] for x, s in rows if s == "new" and not rows[(x, "new")].get("error")} == {"vllm-0.33.0"}
    assert VLLM_HEADLINE in out
