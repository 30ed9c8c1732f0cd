"""The ``chat-template`` renderer: a Jinja chat template rendered the way transformers renders it.

Servers (vLLM, SGLang, TGI, llama.cpp's HF-compatible path) turn a request into a prompt with
``tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)``.
That method renders with ``transformers.utils.chat_template_utils.render_jinja_template``; this
renderer calls the same function, so the sandbox, the ``tojson`` filter
(``json.dumps(..., ensure_ascii=False)``, keys unsorted), ``raise_exception`` and ``strftime_now``
are transformers' own. Tool dicts reach the template unchanged (a ``"strict": null`` stays), which
is what makes a serializer's leaked null visible in the prompt.
"""

from __future__ import annotations

import copy
import datetime
import functools
import json
import os
import types
from pathlib import Path
from typing import Any

from replay.render.base import RenderError

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def special_tokens_from(tokenizer_path: str | os.PathLike[str] | None) -> dict[str, str]:
    """``bos_token``/``eos_token``/``pad_token``/``unk_token`` strings from the
    ``tokenizer_config.json`` beside a tokenizer (a folder, or the folder of a ``tokenizer.json``),
    as ``apply_chat_template`` passes them to the template. Empty when there is none."""
    if tokenizer_path is None:
        return {}
    p = Path(tokenizer_path).expanduser()
    cfg = (p if p.is_dir() else p.parent) / "tokenizer_config.json"
    if not cfg.is_file():
        return {}
    data = json.loads(cfg.read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
        value = data.get(key)
        if isinstance(value, dict):  # AddedToken form
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


#: Special tokens of a tokenizer family, picked by a marker the family's chat templates write,
#: for a template given as a ``.jinja`` file without ``--tokenizer`` (first match wins). The
#: values are the ``bos_token`` / ``eos_token`` of the family's published ``tokenizer_config.json``.
FAMILY_SPECIAL_TOKENS: tuple[tuple[str, dict[str, str]], ...] = (
    ("<|start_header_id|>", {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),  # Llama 3.x (functionary v3, firefunction v2)
    ("<\uff5cbegin\u2581of\u2581sentence\uff5c>", {"bos_token": "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "eos_token": "<\uff5cend\u2581of\u2581sentence\uff5c>"}),  # DeepSeek
    ("<start_of_turn>", {"bos_token": "<bos>", "eos_token": "<eos>"}),  # Gemma 2/3
    ("<|START_OF_TURN_TOKEN|>", {"bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>"}),  # Cohere Command R
    ("<|content|>", {"bos_token": "<s>", "eos_token": "</s>"}),  # Apriel (Mistral/Pixtral tokenizer)
    ("[INST]", {"bos_token": "<s>", "eos_token": "</s>"}),  # Mistral
    ("<|end|>", {"bos_token": "<s>", "eos_token": "<|endoftext|>"}),  # Phi-3.x
    ("<|startoftext|>", {"bos_token": "<|startoftext|>", "eos_token": "<|im_end|>"}),  # LFM2
    ("<|im_start|>", {"eos_token": "<|im_end|>"}),  # Qwen / ChatML (no BOS token)
)


def family_special_tokens(template: str) -> dict[str, str]:
    """``bos_token``/``eos_token`` of the tokenizer family whose marker ``template`` writes
    (:data:`FAMILY_SPECIAL_TOKENS`); empty when no marker matches."""
    for marker, tokens in FAMILY_SPECIAL_TOKENS:
        if marker in template:
            return dict(tokens)
    return {}


def template_special_tokens(template_path: str | os.PathLike[str] | None, template: str, tokenizer_path: str | os.PathLike[str] | None) -> tuple[dict[str, str], str]:
    """The special tokens ``apply_chat_template`` would pass to ``template``, and where they came from.

    In order: the ``tokenizer_config.json`` beside ``--tokenizer`` (``"tokenizer"``); the template
    file itself when it is a ``tokenizer_config.json`` (``"template-file"``); the family table
    (``"family"``); none (``"none"``). Returns ``(tokens, source)``."""
    got = special_tokens_from(tokenizer_path)
    if got:
        return got, "tokenizer"
    if template_path is not None and Path(template_path).suffix == ".json":
        got = _config_tokens(Path(template_path).expanduser())
        if got:
            return got, "template-file"
    got = family_special_tokens(template)
    return (got, "family") if got else ({}, "none")


def _config_tokens(cfg: Path) -> dict[str, str]:
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out: dict[str, str] = {}
    for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, dict):  # AddedToken form
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


def pin_strftime_now(template: str, day: "datetime.date | None") -> None:
    """Make ``strftime_now(fmt)`` in ``template`` format ``day`` (at 00:00:00) instead of now
    (``day`` None: the clock again, as transformers does).

    transformers compiles each template once (``_compile_jinja_template``, an ``lru_cache``) in its
    own sandboxed environment whose global ``strftime_now`` calls ``datetime.now().strftime``; a
    render variable cannot replace it (transformers turns callables in render kwargs into inert
    strings). This sets the global of that cached template's environment; it is called before every
    render, so two renderers of one template with different dates each render their own.
    """
    import datetime as _dt

    from transformers.utils.chat_template_utils import _compile_jinja_template

    env = _compile_jinja_template(template).environment
    if day is None:
        env.globals["strftime_now"] = lambda fmt: _dt.datetime.now().strftime(fmt)
    else:
        env.globals["strftime_now"] = _dt.datetime(day.year, day.month, day.day).strftime


class ChatTemplateRenderer:
    """Render a request through a Jinja chat template with transformers.

    ``template``: the template text. ``special_tokens``: ``bos_token``/``eos_token`` ... strings
    passed to the template (see :func:`special_tokens_from`). ``extra``: more template variables
    (``enable_thinking``, ``date_string``). ``name``: the label on ``renders`` rows.

    The constructor raises ValueError when the template does not compile.
    ``date``: the date the template reads (a ``datetime.date``): ``strftime_now(fmt)`` formats
    that day at 00:00:00 instead of the clock, and ``date_string`` (Llama 3.x templates) is set to
    it as ``%d %b %Y`` unless ``extra`` gives one. None: transformers' own clock.

    ``render(messages, tools)`` returns the prompt with the generation prompt appended
    (``add_generation_prompt=True``). Raises :class:`RenderError` for any template error (a
    ``raise_exception`` call, an undefined attribute, a type error inside the template).
    """

    def __init__(
        self,
        template: str,
        *,
        special_tokens: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
        name: str = "chat-template",
        date: "datetime.date | None" = None,
    ) -> None:
        from transformers.utils.chat_template_utils import _compile_jinja_template

        try:  # a template that does not compile fails every request: say so once, up front
            _compile_jinja_template(template)
        except Exception as exc:
            raise ValueError(f"the chat template does not compile: {type(exc).__name__}: {exc}") from exc
        self.template = template
        self.kwargs = {**(special_tokens or {}), **(extra or {})}
        self.name = name
        self.date = date
        if date is not None:
            self.kwargs.setdefault("date_string", date.strftime("%d %b %Y"))
        self._direct: _DirectRender | None = None
        self.render_path: str | None = None  # set by decide_render_path(), at the latest on the first render

    def decide_render_path(self) -> str:
        """Decide, once per renderer and process, whether :meth:`render` takes the direct path
        (:class:`_DirectRender`) or transformers' ``render_jinja_template``, and return the words
        ``run.json`` records for it (``options.chat_template_paths``): ``"direct: ..."`` or
        ``"transformers: <why the direct path is off>"``.

        The direct path is on only when the installed transformers passes the process-wide check
        (:func:`direct_support`), the template does not use ``sameas``, the template variables
        (``kwargs``: special tokens, ``extra``) are plain JSON, and every probe conversation
        (:data:`PROBE_CONVERSATIONS`) renders through this template to the same text (or the same
        error) both ways. Call it after the last change to ``kwargs``
        (:func:`replay.render.options.template_renderer` does); :meth:`render` calls it on first
        use otherwise. Raises nothing: a probe that cannot run turns the direct path off."""
        if self.render_path is not None:
            return self.render_path
        self._direct = None
        ok, why = direct_support()
        if not ok:
            self.render_path = f"transformers: {why}"
        elif "sameas" in self.template:
            self.render_path = "transformers: the template uses `sameas`, which could tell the direct path's data from transformers' copy"
        elif not _plain(self.kwargs):
            self.render_path = "transformers: template variables that are not plain JSON"
        else:
            direct = _DirectRender.make(self.template)
            if direct is None:  # pragma: no cover - direct_support() said yes
                self.render_path = "transformers: the direct path could not be built"
            else:
                diff = _probe_difference(direct, self.template, self.kwargs)
                if diff is not None:
                    self.render_path = f"transformers: {diff}"
                else:
                    self._direct = direct
                    self.render_path = f"direct: {why}; this template renders the {len(PROBE_CONVERSATIONS)} probe conversations identically"
        return self.render_path

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kw: Any) -> "ChatTemplateRenderer":
        """Read the template from ``path`` (a ``.jinja`` file, or a ``tokenizer_config.json`` whose
        ``chat_template`` field holds it). Raises FileNotFoundError (OSError) for a file that cannot be read, ValueError for one that is
        not UTF-8 text, a ``.json`` that is not JSON or holds no ``chat_template`` string."""
        p = Path(path).expanduser()
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not a chat template: not UTF-8 text (invalid byte at offset {exc.start})") from None
        if p.suffix == ".json":
            try:
                doc = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"not JSON ({exc})") from None
            tmpl = doc.get("chat_template") if isinstance(doc, dict) else None
            if isinstance(tmpl, list):  # named templates: take "default" (or "tool_use" when present)
                named = {t.get("name"): t.get("template") for t in tmpl if isinstance(t, dict)}
                tmpl = named.get("tool_use") or named.get("default")
            if not isinstance(tmpl, str):
                raise ValueError(f"{path}: no chat_template string")
            text = tmpl
        kw.setdefault("name", f"chat-template:{p.name}")
        return cls(text, **kw)

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        pin_strftime_now(self.template, self.date)
        if self.render_path is None:
            self.decide_render_path()
        direct = self._direct
        if direct is not None and direct.plain(messages, tools) and _plain(self.kwargs):
            if direct.checked:
                try:
                    return direct.render(messages, tools or None, self.kwargs)
                except Exception as exc:  # jinja2 TemplateError, TypeError inside the template, ...
                    raise RenderError(render_error_text(exc)) from exc
            official = self._official(messages, tools)  # the first render is made both ways
            try:
                mine = direct.render(messages, tools or None, self.kwargs)
            except Exception:  # noqa: BLE001
                mine = None
            if mine == official:
                direct.checked = True
            else:
                self._direct = None
            return official
        return self._official(messages, tools)

    def _official(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        from transformers.utils.chat_template_utils import render_jinja_template

        try:
            rendered, _ = render_jinja_template(
                conversations=[messages],
                tools=tools or None,
                chat_template=self.template,
                add_generation_prompt=True,
                **self.kwargs,
            )
        except Exception as exc:  # jinja2 TemplateError, TypeError inside the template, ...
            raise RenderError(render_error_text(exc)) from exc
        return rendered[0]


_SCALARS = (str, int, float, bool, type(None))


def _plain(value: Any) -> bool:
    """True when ``value`` is built of exact JSON types only (``dict``, ``list``, ``str``, ``int``,
    ``float``, ``bool``, None; no subclass, no tuple): then transformers' ``_plain_template_data``
    returns an equal copy of it."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t in _SCALARS:
            continue
        if t is dict:
            for k in v:
                if type(k) not in _SCALARS:
                    return False
            stack.extend(v.values())
        elif t is list:
            stack.extend(v)
        else:
            return False
    return True


class _DirectRender:
    """``render_jinja_template`` of transformers for one conversation of plain JSON data, without its deep copy of the data and with each tool's
    ``tojson`` text kept: the same text, about a third less CPU on 30 KB agent prompts.

    What ``render_jinja_template`` does with ``add_generation_prompt=True`` and neither
    ``continue_final_message`` nor an assistant mask: ``_plain_template_data`` on the tools, the
    kwargs and the messages (for exact JSON types a deep copy, which the immutable sandbox makes
    unobservable; data that is not exact JSON takes transformers' own path; a template using ``sameas``, which could tell a copy from the
    original, always does), ``_alias_reasoning_fields`` (its
    own function is called), a dict check per message, then ``compiled.render(messages=...,
    tools=..., documents=None, add_generation_prompt=True, **kwargs)``. The first render of each
    renderer is made both ways and compared; a difference turns this off for the renderer.

    ``tojson`` of a tool dict passed in ``tools`` is kept per (dict, options): the serialized
    tool lists are cached per distinct list (:mod:`replay.render.exchange`) and never mutated, and
    the sandbox forbids mutation; any other value goes to transformers' own filter.
    """

    def __init__(self, compiled: Any, alias: Any) -> None:
        self.compiled = compiled
        self.alias = alias
        self.checked = False
        self._messages: Any = None  # the last messages found plain (old and new sides share them)
        self._tools: dict[int, Any] = {}  # tool lists found plain (cached per distinct list upstream)
        env = compiled.environment
        base = env.filters["tojson"]
        if not isinstance(base, _ToJson):
            base = env.filters["tojson"] = _ToJson(base)
        self.tojson = base
        self.getattr = _sandbox_getattr(env)

    @classmethod
    def make(cls, template: str) -> "_DirectRender | None":
        """The direct renderer of ``template`` on transformers' own compiled template (its
        ``_compile_jinja_template``, the same cached object ``render_jinja_template`` renders
        with), or None when transformers lacks the private functions it uses. Whether it may
        render is :meth:`ChatTemplateRenderer.decide_render_path`'s question."""
        try:
            from transformers.utils import chat_template_utils as ctu
        except ImportError:  # pragma: no cover
            return None
        compile_ = getattr(ctu, "_compile_jinja_template", None)
        if compile_ is None:
            return None
        # a release without _alias_reasoning_fields renders the messages as given (the probes check it)
        alias = getattr(ctu, "_alias_reasoning_fields", None) or _as_given
        return cls(compile_(template), alias)

    def plain(self, messages: Any, tools: Any) -> bool:
        """Whether ``messages`` and ``tools`` may be rendered directly: lists of exact JSON data
        (:func:`_plain`; the last pair checked is remembered: old and new sides share messages)."""
        if tools is not None and id(tools) not in self._tools:
            # transformers raises for a tool that is neither a dict nor a function: its own path says so
            if type(tools) is not list or not all(type(t) is dict for t in tools) or not _plain(tools):
                return False
            if len(self._tools) >= 512:
                self._tools.clear()
            self._tools[id(tools)] = tools  # held: its id is not reused
        if self._messages is not messages:
            if type(messages) is not list or not all(type(m) is dict for m in messages) or not _plain(messages):
                return False
            self._messages = messages
        return True

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, kwargs: dict[str, Any]) -> str:
        """The prompt, as ``render_jinja_template(conversations=[messages], tools=tools,
        add_generation_prompt=True, **kwargs)[0][0]``; raises what the template raises. The
        sandbox's attribute lookup is :func:`_sandbox_getattr`'s during this render."""
        env = self.compiled.environment
        self.tojson.frozen = {id(t) for t in tools or ()}
        env.getattr = self.getattr
        try:
            return self.compiled.render(messages=self.alias(messages), tools=tools, documents=None, add_generation_prompt=True, **kwargs)
        finally:
            self.tojson.frozen = set()
            vars(env).pop("getattr", None)  # transformers' own render keeps the sandbox's method


#: Tool declarations of the probe conversations: Chat Completions shape, ``strict`` null (what
#: ``model-dump`` serializers leak), a flat one without ``function``, nested and non-ASCII values.
_PROBE_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "read", "description": "Read a file.", "strict": None, "parameters": {
        "type": "object", "properties": {"path": {"type": "string", "description": "Pfad – ünïcode"}, "limit": {"type": "integer", "default": None, "maximum": 1e3},
        "globs": {"type": "array", "items": {"type": "string"}}},
        "required": ["path"]}}},
    {"type": "function", "function": {"name": "todo_list", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "name": "flat", "description": "A tool in the Responses shape.", "parameters": {"type": "object"}},
]

#: The conversations :meth:`ChatTemplateRenderer.decide_render_path` renders through every chat
#: template both ways (direct and ``render_jinja_template``) before the direct path renders for
#: it: what agent traffic holds after request preparation (system prompt, tools, an assistant
#: tool call with object and with string arguments, its result, ``content`` None, reasoning under
#: each of the names transformers aliases, multi-part content, an empty conversation).
PROBE_CONVERSATIONS: tuple[tuple[list[dict[str, Any]], list[dict[str, Any]] | None], ...] = (
    ([{"role": "user", "content": "hi"}], None),
    ([{"role": "system", "content": "You are a coding agent.\n\nBe brief."}, {"role": "user", "content": "List the files."}], _PROBE_TOOLS),
    ([
        {"role": "user", "content": "Read a.py"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": {"path": "a.py", "limit": 10}}},
            {"id": "call_2", "type": "function", "function": {"name": "todo_list", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "print(1)\n"},
        {"role": "tool", "tool_call_id": "call_2", "content": "[]"},
        {"role": "user", "content": "Now explain it."},
    ], _PROBE_TOOLS[:2]),
    ([
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Simple sum."},
        {"role": "user", "content": [{"type": "text", "text": "And 3+3?"}, {"type": "text", "text": " Think."}]},
        {"role": "assistant", "content": "6", "reasoning": "Again a sum."},
        {"role": "user", "content": "Thanks"},
    ], []),
    ([], None),
)

#: Templates of our own, rendered both ways by :func:`direct_support`: each construct the direct
#: path changes the handling of (attribute lookups on dicts, loops, namespaces, string methods,
#: ``str.format``, ``tojson`` with its options, kept ``tojson`` texts of tools, the reasoning
#: aliases, ``dict()``, ``raise_exception``, ``strftime_now``) in the shapes chat templates use.
PROBE_TEMPLATES: tuple[str, ...] = (
    """{%- set ns = namespace(calls=0, last_user=-1) -%}
{%- for m in messages -%}{%- if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif -%}{%- endfor -%}
{%- if tools %}<tools>
{% for t in tools %}{{ t | tojson }}
{{ (t.function or t) | tojson(indent=2, sort_keys=True) }}
{{ t | tojson(separators=(',', ':'), ensure_ascii=True) }}
{% if t.function is defined and t.function.parameters is mapping %}{% for k, v in t.function.parameters.get('properties', {}).items() %}{{ k }}={{ v.type }}{% if v.items is callable %} items(){% endif %}{% if 'items' in v %} of {{ v['items'].type }}{% endif %};{% endfor %}{% endif %}
{% endfor %}</tools>
{% endif -%}
{%- for m in messages -%}
<{{ m.role }}{% if loop.first %} first{% endif %}{% if loop.last %} last{% endif %} i={{ loop.index0 }}/{{ loop.length }}>
{%- if m.reasoning_content is defined and m.reasoning_content %}[think:{{ m.reasoning_content | trim }}|{{ m.thinking }}]{% endif -%}
{%- if m.content is string %}{{ m.content.strip().replace('\n', ' ') }}{% if m.content.startswith('Read') %}!{% endif -%}
{%- elif m.content is iterable and m.content is not mapping %}{% for c in m.content %}{{ c['text'] }}{% endfor -%}
{%- elif m.content is none %}(none){% endif -%}
{%- for c in m.tool_calls | default([]) %}{% set ns.calls = ns.calls + 1 %}
<call n="{{ ns.calls }}" id="{{ c.id }}">{{ c.function.name }} {% if c.function.arguments is string %}{{ c.function.arguments }}{% else %}{{ c.function.arguments | tojson }}{% for k, v in c.function.arguments | dictsort %} {{ '{}={}'.format(k, v) }}{% endfor %}{% endif %}</call>
{%- endfor -%}
{%- if m.role == 'tool' %} for {{ m.tool_call_id }} ({{ m.content | length }} chars){% endif %}
{% endfor -%}
{%- set d = dict(a=1, b=messages | length) %}{{ d | tojson }} {{ d.keys() | list | join(',') }} last_user={{ ns.last_user }}
{%- if add_generation_prompt %}
<assistant>{% endif %}""",
    """{{ bos_token | default('') }}{% for m in messages %}{% if m.role not in ['system', 'user', 'assistant', 'tool'] %}{{ raise_exception('role ' + m.role) }}{% endif %}{{ m['role'] | upper }}: {{ m['content'] if m['content'] is string else m['content'] | tojson }}{{ '%s|%d' | format(m.role, loop.index) }}
{% endfor %}{{ strftime_now('%Y') | length }}{% if tools is not none %}{{ tools | map(attribute='type') | join(',') }}{% endif %}{% if messages | length > 4 %}{{ raise_exception('too long: ' ~ messages | length) }}{% endif %}""",
)


@functools.lru_cache(maxsize=1)
def direct_support() -> tuple[bool, str]:
    """Whether the installed transformers can take the direct path, checked once per process:
    ``(True, words)`` when its ``chat_template_utils`` has the private function
    :class:`_DirectRender` renders with (``_compile_jinja_template``; ``_alias_reasoning_fields``
    where the release has it) and
    every :data:`PROBE_TEMPLATES` template renders every :data:`PROBE_CONVERSATIONS` conversation
    to the same text (or the same error) both ways; else ``(False, why)``, and every chat
    template renders with ``render_jinja_template``. The words name the transformers release,
    for ``run.json``. Raises nothing."""
    try:
        import transformers
        from transformers.utils import chat_template_utils as ctu
    except ImportError as exc:  # pragma: no cover - a dependency
        return False, f"transformers cannot be imported ({exc})"
    version = getattr(transformers, "__version__", "?")
    missing = [n for n in ("_compile_jinja_template", "render_jinja_template") if not hasattr(ctu, n)]
    if missing:
        return False, f"transformers {version} has no {', '.join(missing)}"
    for i, template in enumerate(PROBE_TEMPLATES):
        direct = _DirectRender.make(template)
        diff = "cannot be built" if direct is None else _probe_difference(direct, template, {"bos_token": "<s>"})
        if diff is not None:
            return False, f"transformers {version}: probe template {i}: {diff}"
    return True, f"transformers {version} renders the probe templates identically"


def _as_given(chat: Any) -> Any:
    """The messages unchanged: what a transformers release without ``_alias_reasoning_fields``
    renders."""
    return chat


def _probe_difference(direct: _DirectRender, template: str, kwargs: dict[str, Any]) -> str | None:
    """None when ``direct`` renders every :data:`PROBE_CONVERSATIONS` conversation through
    ``template`` with ``kwargs`` as ``render_jinja_template`` does (the same text, or both raising
    with the same error text: :func:`render_error_text`); else what differed, in words."""
    from transformers.utils.chat_template_utils import render_jinja_template

    for i, (messages, tools) in enumerate(PROBE_CONVERSATIONS):
        messages, tools = copy.deepcopy(messages), copy.deepcopy(tools)
        try:
            want = render_jinja_template(conversations=[messages], tools=tools or None, chat_template=template, add_generation_prompt=True, **kwargs)[0][0]
        except Exception as exc:  # noqa: BLE001 - a template error is an answer too
            want = "error: " + render_error_text(exc)
        if not direct.plain(messages, tools):  # pragma: no cover - the probes are plain JSON
            return f"probe conversation {i} is not plain JSON"
        try:
            got = direct.render(messages, tools or None, kwargs)
        except Exception as exc:  # noqa: BLE001
            got = "error: " + render_error_text(exc)
        if got != want:
            return f"probe conversation {i} renders differently on the direct path"
    return None


#: Attribute names a plain ``dict`` instance has (its type's and ``object``'s): ``getattr`` of any
#: other name on an exact ``dict`` raises AttributeError.
_DICT_ATTRS = frozenset(dir(dict))
#: The types ``SandboxedEnvironment.wrap_str_format`` looks at (``types.MethodType``,
#: ``types.BuiltinMethodType``): it returns None for a value of any other type.
_METHODS = frozenset({types.MethodType, types.BuiltinMethodType})


def _sandbox_getattr(env: Any) -> Any:
    """``env.getattr`` (jinja2's ``SandboxedEnvironment.getattr``) returning what it returns, with
    less work per lookup:

    - ``message.role`` on an exact ``dict``, for a name no dict attribute has: the sandbox tries
      ``getattr`` first, which raises AttributeError there, then returns the item; here the item
      is returned without the exception (a missing key goes to the sandbox: its ``Undefined``);
    - any other attribute ``getattr`` finds: the sandbox's ``wrap_str_format`` as it is, then its
      ``is_safe_attribute`` verdict kept per (type of the object, name). That verdict depends on
      nothing else when ``is_safe_attribute`` is jinja2's own (``ImmutableSandboxedEnvironment``:
      the name's prefix, ``is_internal_attribute`` and ``modifies_known_mutable``, both
      ``isinstance`` tests of the object's type); with any other class the sandbox's method is
      used as it is.

    ``loop.index0``, ``ns.multi_step_tool`` and ``message.content`` in the Qwen3 template's
    loops were about half of a render's CPU in the sandbox's checks."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    base = type(env).getattr.__get__(env)
    if type(env).is_safe_attribute is not ImmutableSandboxedEnvironment.is_safe_attribute:
        return base
    wrap = env.wrap_str_format
    is_safe = env.is_safe_attribute
    verdicts: dict[tuple[type, str], bool] = {}

    def getattr_(obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRS:
            try:
                return obj[attribute]
            except KeyError:
                return base(obj, attribute)
        try:
            value = getattr(obj, attribute)
        except AttributeError:
            return base(obj, attribute)
        if type(value) in _METHODS:  # only a bound method can be str.format / format_map
            fmt = wrap(value)
            if fmt is not None:
                return fmt
        key = (type(obj), attribute)
        safe = verdicts.get(key)
        if safe is None:
            safe = verdicts[key] = bool(is_safe(obj, attribute, value))
        return value if safe else env.unsafe_undefined(obj, attribute)

    return getattr_


class _ToJson:
    """transformers' ``tojson`` filter with the text of the current render's tool dicts kept
    (per object and options; the object is held, so its id is not reused)."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.frozen: set[int] = set()
        self.memo: dict[tuple[int, Any, Any, Any, Any], tuple[Any, str]] = {}

    def __call__(self, x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False) -> str:
        if id(x) not in self.frozen:
            return self.base(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
        key = (id(x), ensure_ascii, indent, tuple(separators) if isinstance(separators, list) else separators, sort_keys)
        got = self.memo.get(key)
        if got is None or got[0] is not x:
            text = self.base(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
            if len(self.memo) > 4096:
                self.memo.clear()
            self.memo[key] = got = (x, text)
        return got[1]


def render_error_text(exc: BaseException) -> str:
    """The ``renders.error`` text of a template failure. A template's own ``raise_exception(msg)``
    (transformers raises a bare ``jinja2.TemplateError(msg)``: Mistral's tool-call id check,
    Gemma 2's "System role not supported", Llama 3's single tool call) is the template rejecting
    the request, as a server returns it (HTTP 400 with the message): ``rejected by the template:
    msg``. Anything else (an undefined attribute, a type error inside the template) is
    ``<ExceptionType>: msg``."""
    from jinja2.exceptions import TemplateError

    if type(exc) is TemplateError:
        return f"rejected by the template: {exc}"
    return f"{type(exc).__name__}: {exc}"
