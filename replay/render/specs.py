"""Renderer specs (``--renderer``, ``--reference-encoder``) and the pinned date (``--date``).

A spec names one renderer:

- ``json-tools``: :class:`replay.render.json_tools.JsonToolsRenderer` (only as ``--renderer``);
- ``mistral-common`` or ``mistral-common:VERSION``: :class:`replay.render.mistral.MistralCommonRenderer`
  (``VERSION``: ``v1`` ``v2`` ``v3`` ``v7`` ``tekken`` ``tekken-mm`` or a tokenizer file; default ``v7``);
- ``sglang:MODEL_DIR``, ``vllm:MODEL_DIR``: SGLang's or vLLM's own chat render path in the side's
  interpreter (:mod:`replay.render.framework`, :mod:`replay.adapters.sglang_render`,
  :mod:`replay.adapters.vllm_render`);
- ``harmony``: :class:`replay.render.harmony.HarmonyRenderer` (gpt-oss), with the pinned date as
  its ``Current date``;
- ``path/to/encoding.py:function`` or ``module:function``: a checkpoint's encoding function,
  :class:`replay.render.encoder.EncoderRenderer`;
- ``http[s]://HOST:PORT[/PATH][?OPTIONS]``: a running server's tokenize endpoint,
  :class:`replay.render.http_tokenize.HttpTokenizeRenderer`.
"""

from __future__ import annotations

from replay.errors import UnknownNameError
from replay.render.framework import FRAMEWORKS
from replay.resolve import resolve_spec

import datetime as _dt
import re
from typing import Any

#: The date templates read when ``--date`` is not given: fixed, so that two runs of one capture
#: render the same prompts (a template that prints today's date would otherwise differ per day).
DEFAULT_DATE = _dt.date(2026, 1, 1)


_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def parse_date(text: str) -> _dt.date:
    """``YYYY-MM-DD`` -> ``datetime.date``; raises ValueError naming the accepted form."""
    if not _DATE.fullmatch(text or ""):
        raise ValueError(f"--date {text!r}: expected YYYY-MM-DD")
    try:
        return _dt.date.fromisoformat(text)
    except ValueError as exc:  # the form is right, the day does not exist
        raise ValueError(f"--date {text!r}: not a calendar date ({exc})") from None


def renderer_from_spec(spec: str, *, date: _dt.date | None = DEFAULT_DATE) -> Any:
    """The renderer a spec names (see the module docstring).

    ``date``: the date a Harmony system message carries. Raises ValueError (a
    :class:`replay.plugins.PluginError` for a plugin) for an unknown spec or one that cannot be
    loaded, ImportError when the encoder's package is not installed.
    """
    def builtin(spec: str) -> Any:
        if spec == "json-tools":
            from replay.render.json_tools import JsonToolsRenderer

            return JsonToolsRenderer()
        if spec == "harmony":
            from replay.render.harmony import HarmonyRenderer

            return HarmonyRenderer(date=date)
        if spec.split(":", 1)[0] in FRAMEWORKS:  # SGLang's or vLLM's own render path
            return framework_renderer(spec)
        if spec == "mistral-common" or spec.startswith("mistral-common:"):
            from replay.render.mistral import DEFAULT_VERSION, MistralCommonRenderer

            version = spec.partition(":")[2] or DEFAULT_VERSION
            return MistralCommonRenderer(version)
        return None

    from replay.render.http_tokenize import HttpTokenizeRenderer, is_tokenize_spec

    if is_tokenize_spec(spec):  # a URL holds ':' (not a module:function)
        return HttpTokenizeRenderer(spec)

    def encoder(spec: str, fn: Any) -> Any:
        from replay.render.encoder import EncoderRenderer

        return EncoderRenderer(spec, fn=fn)  # raises ValueError when fn is not callable

    return resolve_spec(
        spec.strip(),
        builtin=builtin,
        plugin=encoder,
        unknown=lambda s: UnknownNameError(
            f"unknown renderer {s!r}: use json-tools, harmony, mistral-common[:VERSION], sglang:MODEL_DIR, vllm:MODEL_DIR, "
            "a checkpoint's encoder as path/to/encoding.py:function or module:function, "
            "or a server's tokenize endpoint as http://HOST:PORT"
        ),
    )

def framework_renderer(spec: str) -> Any:
    """The renderer of ``sglang:MODEL_DIR`` (:class:`replay.adapters.sglang_render.SGLangRenderer`)
    or ``vllm:MODEL_DIR`` (:class:`replay.adapters.vllm_render.VLLMRenderer`), set up at once in an
    interpreter that has the framework (the side's worker: a release it cannot drive fails there,
    before any work), lazily elsewhere (the audit's own process only names it). Raises ValueError
    when the model folder is not given, :class:`replay.adapters.AdapterError` for a release it
    cannot drive."""
    import importlib.util

    name, _, model_dir = spec.partition(":")
    model_dir = model_dir.strip()
    if not model_dir:
        raise ValueError(f"renderer {spec!r}: give the model folder (config.json, tokenizer files, chat template): {name}:MODEL_DIR")
    if name == "sglang":
        from replay.adapters.sglang_render import SGLangRenderer as cls
    else:
        from replay.adapters.vllm_render import VLLMRenderer as cls
    renderer = cls(model_dir)
    if importlib.util.find_spec(name) is not None:
        renderer._setup()
    return renderer
