"""The chat-template renderer's direct path (replay/render/chat_template.py ``_DirectRender``: no deep
copy of plain JSON data, each tool's ``tojson`` text kept) writes what transformers'
``render_jinja_template`` writes: every corpus template, agent traffic with several serializers,
the same tool objects across requests (the kept ``tojson`` texts in use), and the same errors.
"""

from __future__ import annotations

import pytest
from strategies import SHARED

from agent_traffic import agent_requests
from replay.prepare import get_preparer
from replay.render.base import RenderError
from replay.render.chat_template import ChatTemplateRenderer, _plain
from replay.render.options import template_renderer
from replay.tools import client_fields, model_dump

ROOT = SHARED / "corpus" / "chat_templates"


def official(r: ChatTemplateRenderer, messages, tools) -> str:
    try:
        return r._official(messages, tools)
    except RenderError as exc:
        return f"error: {exc}"


def direct(r: ChatTemplateRenderer, messages, tools) -> str:
    assert r._direct is not None and r._direct.plain(messages, tools)
    try:
        return r.render(messages, tools)
    except RenderError as exc:
        return f"error: {exc}"


def test_direct_renders_equal_transformers_renders_on_every_corpus_template():
    if not ROOT.is_dir():
        pytest.skip(f"no {ROOT}")
    prep = get_preparer("vllm")
    bodies = agent_requests(6, seed=21)
    n = errors = direct_used = 0
    for path in sorted(ROOT.rglob("*.jinja")):
        r = template_renderer(path, None, None)
        if r._direct is None:
            assert "sameas" in r.template, path.name
            continue
        fmt = prep.content_format(r.template)
        lists = {}  # one tool list object per serializer, reused across requests (as the render stage's cache does)
        for body in bodies:
            p = prep.prepare("chat.completions", body, fmt)
            for ser in (client_fields, model_dump):
                tools = lists.setdefault(ser.__name__, [ser(t) for t in p.tools])
                want = official(r, p.messages, tools)
                got = direct(r, p.messages, tools)
                assert got == want, path.name
                n += 1
                errors += want.startswith("error: ")
                direct_used += r._direct is not None and r._direct.checked
    assert n == 2 * len(bodies) * 61 and 0 < errors < n / 2
    assert direct_used > n / 2  # the direct path is what renders, after its first comparison


def test_tojson_texts_are_kept_only_for_the_current_tools():
    path = ROOT / "llama.cpp" / "Qwen-Qwen3-0.6B.jinja"
    if not path.is_file():
        pytest.skip(f"no {path}")
    r = template_renderer(path, None, None)
    prep = get_preparer("vllm")
    body = agent_requests(1, seed=2)[0]
    p = prep.prepare("chat.completions", body, prep.content_format(r.template))
    tools = [client_fields(t) for t in p.tools]
    first = r.render(p.messages, tools)
    second = r.render(p.messages, tools)  # direct, tojson texts kept
    assert first == second == official(r, p.messages, tools)
    memo = r._direct.tojson.memo
    assert all(memo[(id(t), False, None, None, False)][0] is t for t in tools)  # each tool's own text, held with it
    other = [dict(t, strict=None) for t in tools]  # new objects: new texts, no stale one
    assert r.render(p.messages, other) == official(r, p.messages, other) != first
    # a planted fault: a kept text gone stale (not the tool's own) is seen
    for t in tools:
        memo[(id(t), False, None, None, False)] = (t, "{}")
    assert r.render(p.messages, tools) != official(r, p.messages, tools)


def test_data_that_is_not_plain_json_takes_transformers_path():
    class Text(str):
        pass

    assert _plain([{"a": [1, 2.5, None, True, "x"]}])
    assert not _plain([{"a": Text("x")}]) and not _plain([{"a": (1, 2)}]) and not _plain([{"a": object()}])
    path = ROOT / "llama.cpp" / "Qwen-Qwen3-0.6B.jinja"
    if not path.is_file():
        pytest.skip(f"no {path}")
    r = template_renderer(path, None, None)
    msgs = [{"role": "user", "content": Text("hi")}]
    assert not r._direct.plain(msgs, None)
    assert not r._direct.plain([{"role": "user", "content": "hi"}], ["not a tool"])  # transformers raises ValueError for it
    with pytest.raises(RenderError, match="ValueError: Tools should either be a JSON schema"):
        r.render([{"role": "user", "content": "hi"}], ["not a tool"])
    assert r.render(msgs, None) == official(r, msgs, None) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
