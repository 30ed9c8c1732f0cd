"""One resolver for side specs: tool parsers, tool serializers, request preparers and renderers.

Every component of a side (``--old-parser``, ``--new-serializer``, ``--reference-preparer``,
``--renderer``, ``--reference-encoder`` ...) is named by a spec in one of three forms
(:func:`spec_kind`):

- a **built-in** name: ``hermes``, ``model-dump``, ``vllm``, ``json-tools``, ``mistral-common:v7``
  (looked up in the table of the component's kind, which its own module owns:
  :data:`replay.parsers.registry.PARSERS`, :data:`replay.tools.SERIALIZERS`,
  :data:`replay.prepare.PREPARERS`, the renderer names of :mod:`replay.render.specs`);
- a **plugin**: ``module:attr`` or ``path/to/file.py:attr``, loaded by
  :func:`replay.plugins.load_object` and checked by the component's own module;
- a **framework** tool parser (tool parsers only): ``sglang/NAME``, ``vllm/NAME``,
  ``trtllm/NAME``, or a plugin that names a framework's parser class, wrapped by
  :mod:`replay.adapters`.

:func:`resolve_spec` does the dispatch once for every kind; each kind's module calls it with its
table and its check (:func:`replay.parsers.get_parser`, :func:`replay.tools.get_serializer`,
:func:`replay.prepare.get_preparer`, :func:`replay.render.specs.renderer_from_spec`). This module
imports nothing of ``replay`` but :mod:`replay.plugins` (where the spec forms are defined) at import time, and
:mod:`replay.adapters` only for a framework spec; the component modules import it, never the other
way round, so no import cycle runs through it (the parsers <-> adapters cycle went through the
tool-parser resolution that now lives here). It runs inside an out-of-process side's interpreter
too (:mod:`replay.worker`), where only the standard library is guaranteed.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from replay.plugins import FRAMEWORK_PREFIXES, is_framework_spec, is_plugin_spec, load_object

__all__ = ["FRAMEWORK_PREFIXES", "spec_kind", "is_framework_spec", "resolve_spec"]

def spec_kind(spec: str) -> str:
    """The form of a side spec: ``"framework"`` (:func:`is_framework_spec`), ``"plugin"``
    (contains ``:``: ``module:attr``, ``file.py:attr``) or ``"builtin"`` (anything else; whether
    the name exists is for the component's table to say). A built-in name that contains ``:``
    (``mistral-common:v7``) is looked up before this is asked (:func:`resolve_spec`)."""
    if is_framework_spec(spec):
        return "framework"
    if is_plugin_spec(spec):
        return "plugin"
    return "builtin"


def resolve_spec(
    spec: str,
    *,
    builtin: Callable[[str], Any],
    plugin: Callable[[str, Any], Any],
    unknown: Callable[[str], Exception],
    frameworks: bool = False,
    native: Optional[Callable[[Any], bool]] = None,
) -> Any:
    """The component ``spec`` names.

    ``builtin(spec)``: the built-in component, or None when ``spec`` names none (asked first, so a
    built-in name may contain ``:``). ``plugin(spec, obj)``: the component made from the loaded
    plugin object, raising the kind's own error when ``obj`` is not one. ``unknown(spec)``: the
    exception for a name that is neither a built-in nor shaped as a plugin (a
    :class:`replay.errors.UnknownNameError`: a usage error). With ``frameworks`` (tool parsers):
    a framework shorthand resolves through :func:`replay.adapters.resolve`, and a plugin object
    for which ``native(obj)`` is false is first offered to :func:`replay.adapters.adapt` (a
    framework's parser class, recognised by its protocol); SGLang's import stubs go in before a
    plugin module is imported (:func:`replay.adapters.before_plugin_import`).

    Raises what ``unknown``/``plugin`` return or raise, :class:`replay.plugins.PluginError` when a
    plugin cannot be loaded, :class:`replay.adapters.AdapterError` for a framework spec the
    framework cannot resolve here.
    """
    got = builtin(spec)
    if got is not None:
        return got
    kind = spec_kind(spec)
    if kind == "framework" and frameworks:
        from replay import adapters  # stdlib only; a framework is imported only for its own specs

        return adapters.resolve(spec)
    if kind == "plugin" or (kind == "framework" and is_plugin_spec(spec)):
        if frameworks:
            from replay import adapters

            adapters.before_plugin_import(spec)
        obj = load_object(spec)
        if frameworks and native is not None and not native(obj):
            from replay import adapters

            adapted = adapters.adapt(obj, spec)
            if adapted is not None:
                return adapted
        return plugin(spec, obj)
    raise unknown(spec)
