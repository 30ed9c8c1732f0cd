"""The chat-template renderer's direct path (replay/render/chat_template.py ``_DirectRender``: no deep
copy of plain JSON data, each tool's ``tojson`` text kept) writes what transformers'
``render_jinja_template`` writes: every corpus template, agent traffic with several serializers,
the same tool objects across requests (the kept ``tojson`` texts in use), and the same errors.
These run against whatever transformers is installed: the direct path is on for a release only
when its probe check passes (``direct_support``), and the tests below show the check turns it off
when the direct path would render differently.
"""

from __future__ import annotations

from pathlib import Path

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
        if r._direct is None:  # off only for a template using `sameas`, and said so
            assert "sameas" in r.template and r.render_path.startswith("transformers: the template uses `sameas`"), (path.name, r.render_path)
            continue
        assert r.render_path.startswith("direct: transformers "), (path.name, r.render_path)
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


def _same(a, b) -> bool:
    from jinja2.runtime import Undefined

    if isinstance(a, Undefined) or isinstance(b, Undefined):
        return type(a) is type(b) and a._undefined_name == b._undefined_name and a._undefined_obj is b._undefined_obj
    if callable(a) and callable(b) and getattr(a, "__name__", None) in ("format", "format_map"):
        return a("x={0}", 1) == b("x={0}", 1) if a.__name__ == "format" else True
    return a is b or a == b


def test_sandbox_getattr_shortcut_returns_what_the_sandbox_returns():
    from jinja2.runtime import LoopContext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.utils import Namespace

    from replay.render.chat_template import _sandbox_getattr

    env = ImmutableSandboxedEnvironment()
    fast = _sandbox_getattr(env)
    loop = LoopContext(iter([1, 2, 3]), env.undefined)
    next(iter(loop))

    def fn() -> None:
        pass

    class Box:  # the names of mutating list/dict methods, harmless here: the verdict is per type
        append, clear, pop = 1, 2, 3

    objects = [
        {"role": "user", "items": "an item named items", "get": 1},
        {},
        "text",
        [1, 2],
        loop,
        Namespace(multi_step_tool=True),
        fn,
        str,
        ("a",),
        3,
        None,
        Box(),
    ]
    names = ["role", "items", "get", "keys", "missing", "__class__", "_private", "startswith", "format", "format_map",
             "upper", "append", "index", "index0", "first", "last", "multi_step_tool", "__code__", "mro", "real", "pop", "clear"]
    for _ in range(2):  # the second round reads the kept verdicts
        for obj in objects:
            for name in names:
                got, want = fast(obj, name), env.getattr(obj, name)
                assert _same(got, want), (obj, name, got, want)


def test_sandbox_getattr_planted_fault_a_dict_method_name_read_as_a_key_is_seen(monkeypatch):
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from replay.render import chat_template

    env = ImmutableSandboxedEnvironment()
    obj = {"items": "an item named items"}
    assert chat_template._sandbox_getattr(env)(obj, "items") == obj.items  # the dict method, as the sandbox gives it
    monkeypatch.setattr(chat_template, "_DICT_ATTRS", frozenset())  # planted: every name read as a key
    assert chat_template._sandbox_getattr(env)(obj, "items") != env.getattr(obj, "items")


def test_sandbox_getattr_is_only_set_during_a_direct_render():
    path = ROOT / "llama.cpp" / "Qwen-Qwen3-0.6B.jinja"
    if not path.is_file():
        pytest.skip(f"no {path}")
    r = template_renderer(path, None, None)
    prep = get_preparer("vllm")
    body = agent_requests(1, seed=3)[0]
    p = prep.prepare("chat.completions", body, prep.content_format(r.template))
    tools = [model_dump(t) for t in p.tools]
    env = r._direct.compiled.environment
    assert r.render(p.messages, tools) == r.render(p.messages, tools) == official(r, p.messages, tools)
    assert "getattr" not in vars(env)  # transformers' own render keeps the sandbox's method


def test_the_direct_path_is_on_for_the_installed_transformers_and_says_so():
    import transformers

    from replay.render import chat_template

    ok, why = chat_template.direct_support()
    assert ok, why  # a release that fails the probes is a test failure: the fast path must be looked at, not lost
    assert why == f"transformers {transformers.__version__} renders the probe templates identically"
    r = ChatTemplateRenderer(chat_template.PROBE_TEMPLATES[0])
    assert r.render_path is None and r._direct is None  # decided at first use
    msgs, tools = chat_template.PROBE_CONVERSATIONS[2]
    assert r.render(msgs, tools) == official(r, msgs, tools)
    assert r.render_path.startswith("direct: transformers ") and r._direct is not None


def test_a_direct_path_that_renders_differently_is_turned_off_by_the_probe(monkeypatch):
    from replay.render import chat_template

    monkeypatch.setattr(chat_template, "_DICT_ATTRS", frozenset())  # planted: a schema's `v.items` read as the key "items"
    chat_template.direct_support.cache_clear()
    try:
        ok, why = chat_template.direct_support()
        assert not ok and why.endswith("probe template 0: probe conversation 1 renders differently on the direct path"), why
        r = ChatTemplateRenderer("{{ messages[0].items is callable }}")
        msgs = [{"role": "user", "content": "hi", "items": "planted"}]
        assert r.render(msgs, None) == "True"  # transformers' path: the dict method, as the sandbox gives it
        assert r._direct is None and r.render_path == f"transformers: {why}"
    finally:
        chat_template.direct_support.cache_clear()


def test_a_template_the_direct_path_renders_differently_is_rendered_by_transformers(monkeypatch):
    from transformers.utils import chat_template_utils as ctu

    from replay.render import chat_template

    assert chat_template.direct_support()[0]  # checked (and kept) before the plant below
    # planted: the direct path's reasoning rule is not the installed release's (transformers 5.2x copies
    # `reasoning` to `reasoning_content`; older 5.x releases pass the messages as given)
    if hasattr(ctu, "_alias_reasoning_fields"):
        planted = chat_template._as_given
    else:
        def planted(chat):
            return [dict(m, reasoning_content=m["reasoning"]) if m.get("reasoning") else m for m in chat]
    monkeypatch.setattr(chat_template._DirectRender, "make", classmethod(lambda cls, t: cls(ctu._compile_jinja_template(t), planted)))
    r = ChatTemplateRenderer("{% for m in messages %}{{ m.content }}{{ m.reasoning_content | default('') }}{% endfor %}")
    assert r.decide_render_path() == "transformers: probe conversation 3 renders differently on the direct path"
    assert r._direct is None
    msgs = [{"role": "assistant", "content": "6", "reasoning": "sum"}]
    assert r.render(msgs, None) == official(r, msgs, None)


def test_run_json_records_the_render_path_of_each_chat_template(tmp_path):
    import json

    from typer.testing import CliRunner

    from replay.cli import app

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["audit", str(root / "samples" / "coding-agent.jsonl"), "--out", str(out), "--jobs", "1",
                                   "--old-chat-template", str(root / "samples" / "templates" / "agent-old.jinja"),
                                   "--new-chat-template", str(root / "samples" / "templates" / "agent-new.jinja"), "--quiet"])
    assert res.exit_code == 0, res.output
    paths = json.loads((out / "run.json").read_text())["options"]["chat_template_paths"]
    assert set(paths) == {"chat-template:agent-old.jinja", "chat-template:agent-new.jinja"}
    assert all(v.startswith("direct: transformers ") for v in paths.values()), paths
