"""The run spec: a run's options as plain, picklable values, and the objects built from them.

A stage's batch function (:func:`replay.pipeline.render_batch`, :func:`replay.pipeline.stream_batch`)
takes a :class:`RunSpec` and builds, once per process, what the spec names: the renderers (a chat
template file, a ``--renderer`` / ``--reference-encoder`` spec), the tokenizer, the chunkings, the
serializers and parsers (:func:`config_for`). A spec is what an executor sends to a pool process
(``--jobs``) or a Ray task: strings, paths, tuples and numbers only, so it pickles and hashes.

``replay``'s command line makes a spec from its options and calls :func:`build_config`; the
errors it raises name the option (``--chat-template x.jinja: ...``), so the CLI only prints them.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

#: ``chunkings`` value that means "the defaults", chosen per side (:func:`replay.pipeline.side_chunkings`).
DEFAULT = None


@dataclass(frozen=True)
class RunSpec:
    """The options of the render and re-stream stages as plain values (see :class:`replay.pipeline.AuditConfig`
    for their meaning, which this mirrors with specs in place of built objects).

    ``chat_template``/``tokenizer``: file paths (str) or None. ``renderer``/``reference_encoder``:
    renderer specs (:func:`replay.render.specs.renderer_from_spec`) or None. ``date``:
    ``YYYY-MM-DD`` or None (the pinned default). ``chunkings``: names, or None for the defaults.
    ``old_pythonpath``/``new_pythonpath``: directories (tuples of str).
    """

    old_serializer: str = "model-dump"
    new_serializer: str = "client-fields"
    reference_serializer: str = "as-sent"
    chat_template: str | None = None
    tokenizer: str | None = None
    renderer: str | None = None
    reference_encoder: str | None = None
    date: str | None = None
    parser: str | None = None
    old_parser: str | None = None
    new_parser: str | None = None
    reference_parser: str | None = None
    old_python: str | None = None
    new_python: str | None = None
    old_pythonpath: tuple[str, ...] = ()
    new_pythonpath: tuple[str, ...] = ()
    old_render_in: str = "audit"  # "python": that side renders in its --old-python interpreter (replay.sides.render_spec)
    new_render_in: str = "audit"
    chunkings: tuple[str, ...] | None = DEFAULT
    replay_timeout: float = 10.0
    batch_rows: int = 512
    # render side (replay.render.options): per-model templates and tokenizers ("PATTERN=FILE"),
    # per-side templates / renderer specs, request preparers (replay.prepare; None: vllm)
    chat_template_routes: tuple[str, ...] = ()
    tokenizer_routes: tuple[str, ...] = ()
    old_chat_template: str | None = None
    new_chat_template: str | None = None
    reference_chat_template: str | None = None
    old_renderer: str | None = None
    new_renderer: str | None = None
    old_preparer: str | None = None
    new_preparer: str | None = None
    reference_preparer: str | None = None

    def replace(self, **changes: Any) -> "RunSpec":
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)


def build_config(spec: RunSpec) -> Any:
    """The :class:`replay.pipeline.AuditConfig` a spec names, with its renderers and tokenizer built
    and ``options`` (for ``run.json``) filled in; ``cfg.spec`` is ``spec``.

    Raises ValueError naming the option for a tokenizer, chat template, renderer or encoder that
    cannot be loaded, and for a bad ``--date`` (ImportError and OSError are given as ValueError
    with the option first too). Spec strings of serializers and parsers are not resolved here
    (:func:`replay.pipeline.validate_specs` does, once per run).
    """
    from replay.pipeline import AuditConfig
    from replay.render.options import render_setup
    from replay.render.specs import DEFAULT_DATE, parse_date

    day = parse_date(spec.date) if spec.date is not None else DEFAULT_DATE
    try:
        setup = render_setup(
            chat_templates=[*([spec.chat_template] if spec.chat_template else []), *spec.chat_template_routes],
            tokenizers=[*([spec.tokenizer] if spec.tokenizer else []), *spec.tokenizer_routes],
            renderer=spec.renderer, reference_encoder=spec.reference_encoder,
            old_chat_template=spec.old_chat_template, new_chat_template=spec.new_chat_template,
            reference_chat_template=spec.reference_chat_template, old_renderer=spec.old_renderer, new_renderer=spec.new_renderer,
            date=day,
        )
    except (ImportError, OSError) as exc:  # the message names the option
        raise ValueError(str(exc)) from None
    tok = setup.tokenizer
    renderer, reference_renderer = setup.renderer, setup.reference_renderer
    chunks = tuple(spec.chunkings) if spec.chunkings is not None else None
    options = {
        "old_serializer": spec.old_serializer,
        "new_serializer": spec.new_serializer,
        "reference_serializer": spec.reference_serializer,
        **setup.options,
        "old_preparer": spec.old_preparer,
        "new_preparer": spec.new_preparer,
        "reference_preparer": spec.reference_preparer,
        "date": day.isoformat(),
        "parser": spec.parser,
        "old_parser": spec.old_parser,
        "new_parser": spec.new_parser,
        "chunkings": list(chunks) if chunks is not None else None,  # None: the defaults, per side (run.json "chunkings")
        "replay_timeout": spec.replay_timeout,
        "reference_parser": spec.reference_parser,
        "old_python": spec.old_python,
        "new_python": spec.new_python,
        "old_pythonpath": os.pathsep.join(spec.old_pythonpath) or None,
        "new_pythonpath": os.pathsep.join(spec.new_pythonpath) or None,
        "old_render_in": spec.old_render_in,
        "new_render_in": spec.new_render_in,
    }
    return AuditConfig(
        old_serializer=spec.old_serializer,
        new_serializer=spec.new_serializer,
        reference_serializer=spec.reference_serializer,
        renderer=renderer,
        reference_renderer=reference_renderer,
        old_renderer=setup.old_renderer,
        new_renderer=setup.new_renderer,
        old_preparer=spec.old_preparer,
        new_preparer=spec.new_preparer,
        reference_preparer=spec.reference_preparer,
        tokenizer=tok,
        parser=spec.parser,
        old_parser=spec.old_parser,
        new_parser=spec.new_parser,
        chunkings=chunks,
        replay_timeout=spec.replay_timeout,
        reference_parser=spec.reference_parser,
        old_python=spec.old_python,
        new_python=spec.new_python,
        old_pythonpath=spec.old_pythonpath,
        new_pythonpath=spec.new_pythonpath,
        old_render_in=spec.old_render_in,
        new_render_in=spec.new_render_in,
        batch_rows=spec.batch_rows,
        options=options,
        spec=spec,
    )


_BUILT: dict[RunSpec, Any] = {}


def config_for(spec: Any) -> Any:
    """The built :class:`replay.pipeline.AuditConfig` of ``spec``, once per process (a cache keyed
    by the spec). An AuditConfig given as ``spec`` is returned as it is (a library caller that
    built its own renderer objects; such a config runs in this process only)."""
    if not isinstance(spec, RunSpec):
        return spec
    cfg = _BUILT.get(spec)
    if cfg is None:
        cfg = _BUILT[spec] = build_config(spec)
    return cfg


def close_built() -> None:
    """Stop the out-of-process sides of every config :func:`config_for` built in this process
    (a pool process's exit hook)."""
    from replay.sides import close_sides

    for cfg in _BUILT.values():
        close_sides(cfg)
