"""Which content form a server hands a chat template: strings, or lists of parts.

vLLM and SGLang look at the template's Jinja syntax tree: a template that loops over a message's
``content`` (``{% for part in message['content'] %}``) gets every content as a list of parts
(``"openai"``), any other template gets strings (``"string"``).

- vLLM (``vllm/renderers/hf.py`` ``_detect_content_format`` with ``_iter_nodes_assign_messages_item``
  / ``_iter_nodes_assign_content_item``): the message variables are the loop targets of
  ``for m in messages`` (and names assigned from ``messages[...]``); ``openai`` when some ``for`` loop
  iterates ``<message var>.content`` / ``<message var>['content']`` (through filters, tests and
  slices). A template that does not parse: ``string``.
- SGLang (``python/sglang/srt/parser/jinja_template_utils.py`` ``detect_jinja_template_content_format``):
  ``openai`` when the template text contains ``image``, ``audio``, ``video`` or ``vision`` at all,
  or some ``for`` loop iterates ``message.content``, ``msg.content`` or ``m.content``; else ``string``.
"""

from __future__ import annotations

import functools
from typing import Any, Iterator

__all__ = ["vllm_content_format", "sglang_content_format"]


def _ast(template: str) -> Any:
    import jinja2

    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template

        env = _compile_jinja_template(template).environment
    except Exception:  # noqa: BLE001 - a template transformers cannot compile
        env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
    try:
        return env.parse(template)
    except Exception:  # noqa: BLE001
        return None


def _is_access(node: Any, varname: str, key: str | None) -> bool:
    """``node`` reads ``varname`` (key None) or ``varname.key`` / ``varname['key']``, possibly
    under filters, tests or a slice (the upstream ``_is_var_or_elems_access``)."""
    import jinja2.nodes as n

    if isinstance(node, n.Filter):
        return node.node is not None and _is_access(node.node, varname, key)
    if isinstance(node, n.Test):
        return _is_access(node.node, varname, key)
    if isinstance(node, n.Getitem) and isinstance(node.arg, n.Slice):
        return _is_access(node.node, varname, key)
    if key is None:
        return isinstance(node, n.Name) and node.ctx == "load" and node.name == varname
    if isinstance(node, n.Getitem):
        return _is_access(node.node, varname, None) and isinstance(node.arg, n.Const) and node.arg.value == key
    if isinstance(node, n.Getattr):
        return _is_access(node.node, varname, None) and node.attr == key
    return False


def _message_vars(root: Any) -> Iterator[str]:
    import jinja2.nodes as n

    for loop in root.find_all(n.For):
        if _is_access(loop.iter, "messages", None) and isinstance(loop.target, n.Name):
            yield loop.target.name
    for assign in root.find_all(n.Assign):
        value = assign.node
        if isinstance(value, n.Getitem) and _is_access(value.node, "messages", None) and isinstance(assign.target, n.Name):
            yield assign.target.name


@functools.lru_cache(maxsize=64)
def vllm_content_format(template: str | None) -> str:
    """``"openai"`` or ``"string"`` for ``template`` by vLLM's rule (module docstring); ``"string"``
    for None (no chat template: json-tools or an encoder)."""
    if not template:
        return "string"
    root = _ast(template)
    if root is None:
        return "string"
    import jinja2.nodes as n

    names = set(_message_vars(root))
    for loop in root.find_all(n.For):
        if any(_is_access(loop.iter, v, "content") for v in names):
            return "openai"
    return "string"


@functools.lru_cache(maxsize=64)
def sglang_content_format(template: str | None) -> str:
    """``"openai"`` or ``"string"`` for ``template`` by SGLang's rule (module docstring)."""
    if not template:
        return "string"
    if any(k in template for k in ("image", "audio", "video", "vision")):
        return "openai"
    root = _ast(template)
    if root is None:
        return "string"
    import jinja2.nodes as n

    for loop in root.find_all(n.For):
        if any(_is_access(loop.iter, v, "content") for v in ("message", "msg", "m")):
            return "openai"
    return "string"
