"""Every chat template of ../shared/corpus/chat_templates renders realistic multi-turn agent
traffic (tests/agent_traffic.py: tool-call turns with ``content: null`` and JSON-string
arguments, tool results, several rounds) once the request is prepared as a server prepares it,
except the templates listed here, each failing for its own reason (docs/sides.md, "Chat templates").
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from strategies import SHARED

from agent_traffic import UNDESCRIBED, agent_requests
from replay.prepare import get_preparer
from replay.render.base import RenderError
from replay.render.options import template_renderer
from replay.tools import client_fields, empty_description

ROOT = SHARED / "corpus" / "chat_templates"
REQUESTS = agent_requests(24, seed=11)

#: Templates that reject OpenAI-SDK agent traffic by design, or need an engine's own Jinja
#: extensions (llama.cpp's minja): file name -> the error every failing request gets.
EXCEPTIONS = {
    # rejected by design (the template's raise_exception)
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "rejected by the template: Tool call IDs should be alphanumeric strings with length 9!",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "rejected by the template: Tool call IDs should be alphanumeric strings with length 9!",
    "google-gemma-2-2b-it.jinja": "rejected by the template: System role not supported",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "rejected by the template: This model only supports single tool-calls at once!",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "rejected by the template: This model only supports single tool-calls at once!",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "rejected by the template: This model only supports single tool-calls at once!",
    # minja (llama.cpp) semantics that Jinja2 / transformers do not have
    "Kimi-K2-Instruct.jinja": "SecurityError: access to attribute 'append' of 'list' object is unsafe.",
    "Kimi-K2-Thinking.jinja": "SecurityError: access to attribute 'append' of 'list' object is unsafe.",
    "llama-cpp-deepseek-r1.jinja": "TypeError: Object of type generator is not JSON serializable",
    "MiroThinker.jinja": "UndefinedError: 'tool' is undefined",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": "UndefinedError: 'dict object' has no attribute 'description'",
    # a variable its own server passes
    "fireworks-ai-llama-3-firefunction-v2.jinja": "UndefinedError: 'functions' is undefined",
}
#: Templates that need a preparer other than the default (vllm): functionary v3.2 concatenates
#: ``arguments`` as a string, which every server's preparation has parsed into an object.
PREPARER = {"meetkai-functionary-medium-v3.2.jinja": "as-sent"}
#: Templates that need every tool to have a description (a tool declared without one fails with
#: client-fields and renders with empty-description).
NEED_DESCRIPTION = {
    "Apertus-8B-Instruct.jinja", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "meetkai-functionary-medium-v3.1.jinja", "openai-gpt-oss-120b.jinja",
}


def templates() -> list[Path]:
    if not ROOT.is_dir():
        pytest.skip(f"no {ROOT}")
    return sorted(ROOT.rglob("*.jinja"))


def failures(path: Path, preparer: str, serializer=client_fields, requests=REQUESTS) -> collections.Counter:
    """Error text -> requests failing with it, for one template."""
    r = template_renderer(path, None, None)
    prep = get_preparer(preparer)
    fmt = prep.content_format(r.template)
    out: collections.Counter = collections.Counter()
    for body in requests:
        p = prep.prepare("chat.completions", body, fmt)
        try:
            prompt = r.render(p.messages, [serializer(t) for t in p.tools])
        except RenderError as exc:
            out[str(exc)] += 1
        else:
            assert "None" not in prompt.replace("Optional", ""), path.name  # no null printed as text
    return out


def test_every_template_renders_agent_traffic_except_the_listed_ones():
    paths = templates()
    assert len(paths) == 61
    rendering, failing = [], {}
    for p in paths:
        got = failures(p, PREPARER.get(p.name, "vllm"))
        (failing.__setitem__(p.name, got) if got else rendering.append(p.name))
    assert set(failing) == set(EXCEPTIONS), {k: v.most_common(1) for k, v in failing.items()}
    for name, got in failing.items():
        assert list(got) == [EXCEPTIONS[name]], name
    assert len(rendering) == 49


def test_llama3_rejects_only_the_turns_with_parallel_calls():
    path = next(p for p in templates() if p.name == "meta-llama-Llama-3.1-8B-Instruct.jinja")
    single = [b for b in REQUESTS if all(len(m.get("tool_calls") or ()) <= 1 for m in b["messages"])]
    assert 0 < len(single) < len(REQUESTS)
    assert not failures(path, "vllm", requests=single)
    assert sum(failures(path, "vllm").values()) == len(REQUESTS) - len(single)


def test_as_sent_traffic_renders_through_far_fewer_templates():
    """Without a server's preparation (the client's JSON straight to the template) most tool-call
    templates fail on ``content: null`` or string arguments: 28 of 61 render every request."""
    ok = [p.name for p in templates() if not failures(p, "as-sent")]
    assert len(ok) == 28
    for name in ("Qwen-Qwen3-0.6B.jinja", "Qwen3-Coder.jinja", "GLM-4.6.jinja", "openai-gpt-oss-120b.jinja", "MiniMax-M2.jinja"):
        assert name not in ok and not failures(next(p for p in templates() if p.name == name), "vllm"), name


def test_templates_that_need_a_description():
    with_undescribed = [dict(b, tools=[*b["tools"], UNDESCRIBED]) for b in REQUESTS[:6]]
    needs = set()
    for p in templates():
        if p.name in EXCEPTIONS:
            continue
        prep = PREPARER.get(p.name, "vllm")
        if failures(p, prep, client_fields, with_undescribed):
            assert not failures(p, prep, empty_description, with_undescribed), p.name
            needs.add(p.name)
    assert needs == NEED_DESCRIPTION
