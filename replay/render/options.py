"""The render-side command-line options resolved into renderers: per-side templates and renderers,
per-model template routes, and the special tokens each template gets.

:func:`render_setup` is what ``replay audit`` / ``replay render`` call; it raises ValueError (or
OSError / ImportError) with the option named first, so the CLI only prints it.

- ``--chat-template FILE`` (old and new, and the reference unless ``--reference-encoder`` /
  ``--reference-chat-template``); repeatable as ``--chat-template 'PATTERN=FILE'``: the served model
  name picks the template (:class:`replay.render.exchange.ModelRoutes`, ``fnmatch`` patterns such
  as ``Qwen/Qwen3*``, first match wins); an exchange no pattern matches is rendered with the plain
  ``--chat-template FILE`` when one is given, else with ``json-tools``.
- ``--tokenizer FILE`` likewise: a plain one counts tokens (and is the ``token`` chunking's);
  ``PATTERN=FILE`` gives the routed template of that pattern its tokenizer (token counts and
  special tokens).
- ``--old-chat-template`` / ``--new-chat-template`` / ``--reference-chat-template`` and
  ``--old-renderer`` / ``--new-renderer``: one side's renderer, defaulting to the shared one.
- Special tokens (``bos_token``, ``eos_token`` ...), as ``apply_chat_template`` passes them:
  :func:`replay.render.chat_template.template_special_tokens` (the tokenizer's config, the
  template file's, or the family's).
"""

from __future__ import annotations

from replay.errors import UnknownNameError

import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RenderSetup", "render_setup", "split_route", "template_renderer"]


@dataclass
class RenderSetup:
    """Resolved render options: ``renderer`` (old/new default; a
    :class:`replay.render.exchange.ModelRoutes` with routes), ``old_renderer`` / ``new_renderer`` /
    ``reference_renderer`` (None: the default), ``tokenizer`` (the plain ``--tokenizer``, loaded)
    and ``tokenizer_path``, and ``options`` for ``run.json``."""

    renderer: Any
    old_renderer: Any = None
    new_renderer: Any = None
    reference_renderer: Any = None
    tokenizer: Any = None
    tokenizer_path: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


def split_route(value: str) -> tuple[str | None, str]:
    """``'PATTERN=FILE'`` -> ``(PATTERN, FILE)``; a value with no ``=``, or naming an existing
    file as a whole, -> ``(None, value)``."""
    if "=" not in value or Path(value).expanduser().exists():
        return None, value
    pattern, _, path = value.partition("=")
    return (pattern.strip() or None), path.strip()


def template_renderer(path: str | os.PathLike[str], tokenizer_path: str | None, day: _dt.date | None, *, name: str | None = None) -> Any:
    """A :class:`replay.render.chat_template.ChatTemplateRenderer` of the template file with the
    special tokens :func:`replay.render.chat_template.template_special_tokens` finds; its
    ``special_tokens_source`` says where they came from. Raises OSError / ValueError."""
    from replay.render.chat_template import ChatTemplateRenderer, template_special_tokens

    kw: dict[str, Any] = {"date": day}
    if name is not None:
        kw["name"] = name
    r = ChatTemplateRenderer.from_file(path, **kw)
    tokens, source = template_special_tokens(path, r.template, tokenizer_path)
    r.kwargs = {**tokens, **r.kwargs}
    r.special_tokens_source = source
    r.decide_render_path()  # with the template variables final; run.json records the words
    return r


def _load_tokenizer(option: str, path: str) -> Any:
    from replay.render import load_tokenizer

    try:
        return load_tokenizer(path)
    except (OSError, ValueError, Exception) as exc:  # tokenizers raises its own Exception type
        raise ValueError(f"{option} {path}: {exc}") from None


def render_setup(
    *,
    chat_templates: list[str] | None = None,
    tokenizers: list[str] | None = None,
    renderer: str | None = None,
    old_chat_template: str | None = None,
    new_chat_template: str | None = None,
    reference_chat_template: str | None = None,
    old_renderer: str | None = None,
    new_renderer: str | None = None,
    reference_encoder: str | None = None,
    date: _dt.date | None = None,
) -> RenderSetup:
    """Resolve the render options (module docstring) into a :class:`RenderSetup`.

    Raises ValueError naming the option for a bad value (two plain ``--chat-template``, a side
    given both a template and a renderer, ``--reference-chat-template`` with
    ``--reference-encoder``, a template that does not compile, a pattern's tokenizer that does not
    load), OSError for a missing file, ImportError for an encoder whose package is missing."""
    from replay.render.exchange import ModelRoutes
    from replay.render.json_tools import JsonToolsRenderer
    from replay.render.specs import renderer_from_spec

    plain_tok: str | None = None
    route_toks: dict[str, str] = {}
    for value in tokenizers or []:
        pattern, path = split_route(value)
        if pattern is None:
            if plain_tok is not None:
                raise ValueError(f"--tokenizer {value}: a second plain --tokenizer (give per-model ones as 'PATTERN=FILE')")
            plain_tok = path
        else:
            route_toks[pattern] = path
    tokenizer = _load_tokenizer("--tokenizer", plain_tok) if plain_tok is not None else None

    def tmpl(option: str, path: str, tok_path: str | None) -> Any:
        try:
            return template_renderer(path, tok_path, date)
        except (OSError, ValueError) as exc:  # plain classes: UnicodeDecodeError & co. take other arguments
            raise (OSError if isinstance(exc, OSError) else ValueError)(f"{option} {path}: {exc}") from None

    plain: str | None = None
    routes: list[tuple[str, Any, Any]] = []
    for value in chat_templates or []:
        pattern, path = split_route(value)
        if pattern is None:
            if plain is not None:
                raise ValueError(f"--chat-template {value}: a second plain --chat-template (give per-model ones as 'PATTERN=FILE')")
            plain = path
        else:
            tok_path = route_toks.get(pattern, plain_tok)
            tok = tokenizer if tok_path == plain_tok else _load_tokenizer(f"--tokenizer {pattern}=", tok_path) if tok_path else None
            routes.append((pattern, tmpl(f"--chat-template {pattern}=", path, tok_path), tok))
    unused = set(route_toks) - {p for p, _, _ in routes}
    if unused:
        raise ValueError(f"--tokenizer {sorted(unused)[0]}=...: no --chat-template with that pattern")

    def spec(option: str, value: str) -> Any:
        try:
            return renderer_from_spec(value, date=date)
        except (ImportError, OSError, ValueError) as exc:  # plain classes: subclasses take other arguments
            raise next(c for c in (ImportError, OSError, UnknownNameError, ValueError) if isinstance(exc, c))(f"{option} {value}: {exc}") from None

    if plain is not None:
        base: Any = tmpl("--chat-template", plain, plain_tok)
    elif renderer is not None:
        base = spec("--renderer", renderer)
    else:
        base = JsonToolsRenderer()
    if routes:
        base = ModelRoutes(routes, base, tokenizer)
    out = RenderSetup(renderer=base, tokenizer=tokenizer, tokenizer_path=plain_tok)
    for side, t, r in (("old", old_chat_template, old_renderer), ("new", new_chat_template, new_renderer)):
        if t is not None and r is not None:
            raise ValueError(f"--{side}-chat-template and --{side}-renderer both name the {side} side's renderer: give one")
        if t is not None:
            setattr(out, f"{side}_renderer", tmpl(f"--{side}-chat-template", t, plain_tok))
        elif r is not None:
            setattr(out, f"{side}_renderer", spec(f"--{side}-renderer", r))
    if reference_chat_template is not None and reference_encoder is not None:
        raise ValueError("--reference-chat-template and --reference-encoder both name the reference renderer: give one")
    if reference_chat_template is not None:
        out.reference_renderer = tmpl("--reference-chat-template", reference_chat_template, plain_tok)
    elif reference_encoder is not None:
        out.reference_renderer = spec("--reference-encoder", reference_encoder)

    def label(r: Any) -> str | None:
        return None if r is None else r.name

    out.options = {
        "renderer": base.name,
        "chat_template": plain,
        "chat_template_routes": [f"{p}={v}" for p, v in (split_route(c) for c in chat_templates or []) if p is not None],
        "tokenizer": plain_tok,
        "tokenizer_routes": [f"{p}={v}" for p, v in route_toks.items()],
        "old_renderer": label(out.old_renderer),
        "new_renderer": label(out.new_renderer),
        "reference_encoder": label(out.reference_renderer) if reference_encoder is not None else None,
        "reference_chat_template": reference_chat_template,
        "chat_template_paths": {
            r.name: r.render_path
            for r in [base.fallback if routes else base, *(x for _, x, _ in routes), out.old_renderer, out.new_renderer, out.reference_renderer]
            if r is not None and hasattr(r, "decide_render_path")
        },
        "special_tokens": {
            r.name: getattr(r, "special_tokens_source", None)
            for r in [base.fallback if routes else base, *(x for _, x, _ in routes), out.old_renderer, out.new_renderer, out.reference_renderer]
            if r is not None and hasattr(r, "special_tokens_source")
        },
    }
    return out
